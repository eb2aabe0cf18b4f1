"""Wikipedia passage builder: dump or extracted text -> clean prose -> disjoint N-word passages.

``sources`` detects and streams the inputs, ``wikitext`` turns MediaWiki markup into prose,
``passages`` splits prose into passages, and ``build`` runs it all in parallel, resumably.
"""
