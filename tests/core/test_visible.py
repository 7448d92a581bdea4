"""What you see is what runs: invisible and direction-changing characters are shown, not hidden."""
from django.template import Context, Template

from core.visible import has_invisible, reveal, reveal_json, reveal_line


def test_right_to_left_override_is_revealed():
    assert reveal("bob@\u202emoc.elpmaxe") == "bob@⟨U+202E⟩moc.elpmaxe"


def test_zero_width_space_is_revealed():
    assert reveal("pay\u200bpal") == "pay⟨U+200B⟩pal"


def test_byte_order_mark_is_revealed():
    assert reveal("\ufeffhello") == "⟨U+FEFF⟩hello"


def test_tag_character_is_revealed_with_five_digits():
    assert reveal("ok\U000e0041") == "ok⟨U+E0041⟩"


def test_other_invisibles_are_revealed():
    hidden = "\u00ad\u061c\u2066\u2069\u2060\u115f\u3164\uffa0\u180e\ufe0f\U000e0100\x00\x1b\x7f"
    assert reveal(hidden) == "".join(f"⟨U+{ord(c):04X}⟩" for c in hidden)


def test_newlines_and_tabs_are_untouched():
    assert reveal("a\nb\tc\r\n") == "a\nb\tc\r\n"


def test_plain_text_is_unchanged():
    text = "Hello, wörld! 中文 😀 {\"a\": [1, 2]} <b>&amp;</b>"
    assert reveal(text) == text
    assert not has_invisible(text)


def test_reveal_is_idempotent():
    once = reveal("bob@\u202emoc.elpmaxe\u200b\U000e0041\x00")
    assert reveal(once) == once
    assert not has_invisible(once)


def test_reveal_line_also_reveals_newlines():
    assert reveal_line("hi\nBcc: x\u202e") == "hi⟨U+000A⟩Bcc: x⟨U+202E⟩"


def test_has_invisible_finds_a_nested_dict_key():
    assert has_invisible({"outer": {"ke\u200by": 1}})


def test_has_invisible_finds_a_nested_dict_value():
    assert has_invisible({"outer": {"to": "bob@\u202emoc.elpmaxe"}})


def test_has_invisible_finds_a_list_item():
    assert has_invisible({"to": ["alice@example.com", ("x\ufeff",)]})


def test_has_invisible_ignores_other_types():
    assert not has_invisible({"n": 1, "f": 1.5, "b": True, "none": None, "text": "line\nbreak\ttab"})


def test_reveal_json_shows_arguments_with_invisibles_revealed():
    assert reveal_json({"to": "bob@\u202emoc.elpmaxe", "a": 1}) == '{\n  "a": 1,\n  "to": "bob@⟨U+202E⟩moc.elpmaxe"\n}'


def test_template_filters_reveal_and_still_escape():
    template = Template("{% load hitl_tags %}{{ text|reveal }}|{{ none|reveal }}|{{ args|reveal_json }}|{{ args|has_invisible }}")
    html = template.render(Context({"text": "<b>\u202e</b>", "none": None, "args": {"x": "<\u200b>"}}))
    assert html == '&lt;b&gt;⟨U+202E⟩&lt;/b&gt;||{\n  &quot;x&quot;: &quot;&lt;⟨U+200B⟩&gt;&quot;\n}|True'
