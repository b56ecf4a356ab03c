"""shardfuzz: a fuzzer for JAX's sharding transforms.

Modules: ``typecheck`` (the program model's typing rules), ``render`` (program to
Python source), ``worker`` / ``execute`` (the JAX subprocess and its parent side),
``reference`` (unsharded evaluation), ``campaign`` (the Hypothesis-driven driver),
``features``, ``cli``. The program format is ``fuzz/schemas/program.schema.json``.
"""
__version__ = "0.1.0"
