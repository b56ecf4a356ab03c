"""The errors the program model raises (a module of its own at the bottom of the house: every stage
imports it, it imports nothing)."""
from __future__ import annotations


class ProgramError(ValueError):
    """A program breaks a typing rule: the generator or a hand edit made it invalid."""
