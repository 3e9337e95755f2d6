from .suite import main

main()
