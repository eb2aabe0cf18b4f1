from ifqa.cli import main

main()
