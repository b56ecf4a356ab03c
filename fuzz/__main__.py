from fuzz.cli import main

main()
