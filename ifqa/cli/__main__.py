from ifqa.cli import run

run()
