from ifqa.corpus import wikitext


def test_keeps_prose_and_link_text_drops_markup():
    text = wikitext.clean(
        "'''Glimmerton''' is a town{{cn}} on the [[River Lune|Lune]]<ref name=a>Atlas</ref> and [[Kendal]]. "
        "<!-- hidden --> See [http://example.org the site] &amp; [[File:x.jpg|thumb|caption]] "
        "[[Category:Towns]] [[de:Glimmerton]] <span>kept</span> <math>x^2</math>"
    )
    assert text == "Glimmerton is a town on the Lune and Kendal. See the site & kept"


def test_headings_become_short_sentences_only_when_followed_by_prose():
    text = wikitext.clean(
        "Intro.\n== History ==\nOld.\n== See also ==\n* [[A]]\n== References ==\n{{reflist}}\n=== Deep ===\nDeep text."
    )
    assert text.split("\n") == ["Intro.", "History.", "Old.", "References.", "Deep.", "Deep text."]


def test_tables_lists_and_templates_go():
    text = wikitext.clean(
        "A.\n{| class=wikitable\n|-\n| cell || cell\n|}\n* item\n# numbered\n; term\n{{Infobox|a=b}}\nB."
    )
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


def test_links_reduce_from_the_inside_out():
    text = wikitext.clean(
        "A [[Kruskal&ndash;Wallis test|Kruskal&ndash;Wallis]] test. "
        "[[File:C4.png|thumb|Bicyclo[1.1.0]butane and [[n-butane|''n''-butane]] isomers]]"
        "A [[:Category:Derelict satellites|derelict]] [[space debris|object]] and [[Moon#Orbit|]] [[#Local]] [[ Earth ]]."
    )
    assert text == "A Kruskal–Wallis test. A derelict object and Local Earth."


def test_markup_that_is_not_a_tag_or_url_stays_text():
    assert wikitext.clean("If x<y and y>z then x<z.") == "If x<y and y>z then x<z."
    assert wikitext.clean("See http://example.org/x?a=1 for more, or [//example.org here].") == "See for more, or here."


def test_html_lists_go_and_unbalanced_headings_keep_their_extra_signs():
    text = wikitext.clean('Changed:\n<ol start="4">\n<li>No animal shall drink.</li>\n</ol>\n==Title===\nBody.')
    assert text.split("\n") == ["Changed:", "Title=.", "Body."]


def test_quotes_pair_before_links_are_reduced():
    assert wikitext.clean("serving as ''[[wikt:pro forma|pro-forma]]'' advisor") == 'serving as "" advisor'
    assert wikitext.clean("The '''''Iliad''''' and ''[[Odyssey]]'''s end") == """The "Iliad" and "Odyssey"'s end"""


def test_list_items_take_only_their_line_closed_or_not():
    text = wikitext.clean(
        "Intro.\n<ul>\n<li>one\n<li>two\n</ul>\nProse that must survive.\n<dl><dt>term<dd>def</dl>\nMore."
    )
    assert text == "Intro.\nProse that must survive.\ndef\nMore."
    assert wikitext.clean("Colors:<ul><li>red</li></ul> are primary.") == "Colors:\nare primary."


def test_rules_urls_nowiki_and_extension_tags():
    assert wikitext.clean("A\n----\nB") == "A\nB"
    assert wikitext.clean("More (see http://example.org/a), then. End at http://a.b/c.") == "More (see ), then. End at."
    assert wikitext.clean("Write <nowiki>[[x]] {{y}} ''z''</nowiki> literally.") == "Write [[x]] {{y}} ''z'' literally."
    assert wikitext.clean("Use <nowiki>&lt;br&gt; &amp; &ndash;</nowiki> tags.") == "Use <br> & – tags."
    assert wikitext.clean('Map <maplink zoom=5>{"a": 1}</maplink> here <tr><td>cell</td></tr>.') == "Map here cell."


def test_template_closing_on_a_line_of_its_own_after_a_bar():
    assert wikitext.clean("{{Infobox\n|a=b\n|}}\nBody. [[Ali: Fear Eats the Soul]] and [[de:Foo]].") == (
        "Body. Ali: Fear Eats the Soul and."
    )
    assert (
        wikitext.clean("Before.{{Infobox|data=\n{|\n|a\n|}}} After.") == "Before. After."
    )  # a table closing in a template
