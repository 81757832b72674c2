import typer

app = typer.Typer(help="tunesearch: W4A16 kernel autotuner")


@app.command()
def version():
    print("0.1.0")
