from ifqa.corpus import wikitext


def test_keeps_prose_and_link_text_drops_markup():
    text = wikitext.clean(
        "'''Glimmerton''' is a town{{cn}} on the [[River Lune|Lune]]<ref name=a>Atlas</ref> and [[Kendal]]. "
        "<!-- hidden --> See [http://example.org the site] &amp; [[File:x.jpg|thumb|caption]] "
        "[[Category:Towns]] [[de:Glimmerton]] <span>kept</span> <math>x^2</math>"
    )
    assert text == "Glimmerton is a town on the Lune and Kendal. See the site & kept"


def test_headings_become_short_sentences_only_when_followed_by_prose():
    text = wikitext.clean("Intro.\n== History ==\nOld.\n== See also ==\n* [[A]]\n== References ==\n{{reflist}}\n=== Deep ===\nDeep text.")
    assert text.split("\n") == ["Intro.", "History.", "Old.", "References.", "Deep.", "Deep text."]


def test_tables_lists_and_templates_go():
    text = wikitext.clean("A.\n{| class=wikitable\n|-\n| cell || cell\n|}\n* item\n# numbered\n; term\n{{Infobox|a=b}}\nB.")
    assert text == "A.\nB."


def test_indented_quotations_stay():
    assert wikitext.clean("He wrote:\n:If I were to say so.\nEnd.") == "He wrote:\nIf I were to say so.\nEnd."


def test_braces_inside_math_do_not_swallow_the_article():
    text = wikitext.clean("Before <math>\\frac{{a}}{b_{c}}</math> after.\n== Next ==\nMore text.")
    assert text == "Before after.\nNext.\nMore text."


def test_empty_parentheses_left_by_templates_are_removed():
    assert wikitext.clean("Foo ({{lang-fr|Fou}}; {{IPA|x}}) is a bar.") == "Foo is a bar."


def test_disambiguation_detection():
    assert wikitext.is_disambiguation("Mercury (disambiguation)", "")
    assert wikitext.is_disambiguation("Mercury", "'''Mercury''' may be:\n{{Disambiguation|geo}}")
    assert wikitext.is_disambiguation("Smith", "{{hndis}}")
    assert not wikitext.is_disambiguation("Mercury", "{{Infobox planet}} Mercury is a planet.")


def test_italics_become_quotes_like_wikiextractor():
    assert wikitext.clean("''Animal Farm'' is a '''novella'''.") == '"Animal Farm" is a novella.'


def test_strip_blocks_handles_nesting_and_broken_markup():
    assert wikitext.strip_blocks("a {{x|{{y}}|z}} b") == "a  b"
    assert wikitext.strip_blocks("a\n{|\n| {{c}} || d\n|}\nb") == "a\n\nb"
    assert wikitext.strip_blocks("a }} b {{x}} c") == "a }} b  c"  # a stray closer is text
    assert wikitext.strip_blocks("a {{never closed") == "a "
