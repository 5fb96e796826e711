from localserve.cli import main

main()
