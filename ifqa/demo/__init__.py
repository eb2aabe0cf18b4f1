"""The embedded demo set's files (data only; see README.md here and ``ifqa.datasets.demo``)."""
