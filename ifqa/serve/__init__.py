"""`ifqa serve`: a page to ask one question and see every stage, and a JSON API for other tools.

``service`` holds the pipeline and knows nothing of HTTP; ``app`` is the FastAPI layer; ``page/``
is the web page (plain HTML, CSS and JavaScript, served by the same process).
"""
