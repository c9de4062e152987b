"""Fake role and tool markup: <system>, <|im_start|>, [INST], ### System:, Human:/Assistant: turns, JSON roles."""

from __future__ import annotations

import re

from mnemo_guard.model import ROLE_TAG
from mnemo_guard.normalize import View
from mnemo_guard.scan import Hit, at_words, occurrences, wordset

_SPECIAL_TOKEN = re.compile(
    r"<\|\s*/?\s*(?:im_start|im_end|im_sep|system|user|assistant|developer|endoftext|eot_id|eom_id|start_header_id"
    r"|end_header_id|begin_of_text|end_of_text|begin[_▁ ]of[_▁ ]sentence|start|end|message|channel|return|call"
    r"|tool_calls?|tool_results?|tool|python_tag|function_calls?)\s*\|>"
)
_TURN_TOKEN = re.compile(r"<(?:start|end)_of_turn>")
_TAG = re.compile(
    r"<\s*/?\s*(?P<name>system(?:[-_ ](?:prompt|message|instructions?|reminder|override|note|update|directive))?"
    r"|developer[-_ ](?:message|instructions?|prompt)|tool_calls?|tool_use|tool_result|tool_response|tool_code"
    r"|function_calls?|function_results?|function_response|invoke|antml:[a-z_]+|assistant|human|im_start|im_end"
    r"|(?:admin|override|hidden|secret)[-_](?:instructions?|prompt|override)|instructions?[-_](?:override|update)|admin"
    r"|instructions)"
    r"(?P<attrs>\s[^<>\n]{0,200})?\s*/?>"
)
_COMPONENT = re.compile(r"(?:[A-Z][a-z0-9]{2,})+")
_HEADING = re.compile(r"#{1,6}[ \t]*(?:system|instructions?|human|assistant)[ \t]*:")
_TURN = re.compile(r"(?:human|assistant)[ \t]*:")
_JSON_ROLE = re.compile(r"""["']role["']\s*:\s*["'](?:system|developer)["']""")
# `{"role": "system", "content": SYSTEM_PROMPT}` is code building a request, not an injected message.
_CODE_CONTENT = re.compile(r"""\s*,\s*["']content["']\s*:\s*(?![\s"'])""")
_MARKDOWN_ROLE = re.compile(r"\[(?:system|assistant)\]\(#[\w-]*\)")
_BANNER = re.compile(r"(?:begin|start|end)\s+(?:of\s+)?(?:the\s+)?system\s+(?:prompt|message|instructions)")


_ROLE_WORDS = wordset(
    "system developer tool function invoke antml assistant human im admin override hidden secret instruction",
    "instructions role inst sys begin start end turn",
)
_TAG_WORDS = wordset(
    "system developer tool function invoke antml assistant human im admin override hidden secret instructions"
)
# `[SYSTEM] new policy: …` or `System: you must …`: a role label followed by an order to the model.
_LABEL = re.compile(r"\[(?:system|admin|developer|assistant)(?:\s+(?:message|prompt|note|override|instructions?))?\]")
_LABEL_ORDER = re.compile(
    r"\b(?:you\s+(?:must|are|will|should|shall|have\s+to|need\s+to)|always|never|ignore|disregard|from\s+now\s+on"
    r"|do\s+not|don'?t|new\s+(?:instructions|rules|policy|polic(?:y|ies))|override|comply|obey|reveal)\b"
)
_MARKER_WORDS = wordset("system instruction instructions human assistant developer admin")
_BANNER_WORDS = wordset("begin start end")


def find_role_tags(view: View) -> list[Hit]:
    """Every fake role or tool marker in the view (the original text decides case: `<System>` is a component)."""
    low = view.low
    words = view.words
    if words.isdisjoint(_ROLE_WORDS) and not view.has("<|"):
        return []
    hits: list[Hit] = []
    if view.has("<|"):
        hits.extend(Hit(ROLE_TAG, i, m.end()) for i in occurrences(low, "<|") if (m := _SPECIAL_TOKEN.match(low, i)))
    if b"turn" in words and view.has("_of_turn>"):
        hits.extend(Hit(ROLE_TAG, i, m.end()) for i in occurrences(low, "<") if (m := _TURN_TOKEN.match(low, i)))
    if b"inst" in words or b"sys" in words:
        for needle in ("[inst]", "[/inst]", "<<sys>>", "<</sys>>"):
            hits.extend(Hit(ROLE_TAG, i, i + len(needle)) for i in occurrences(low, needle))
    if view.has("<"):
        for i in at_words(view, _TAG_WORDS, identifiers=True):
            lt = low.rfind("<", max(0, i - 3), i)
            if lt == -1 or low[lt + 1 : i].strip(" /") != "":
                continue
            m = _TAG.match(low, lt)
            if m and _tag_counts(view, m):
                hits.append(Hit(ROLE_TAG, m.start(), m.end()))
    if ":" in low:
        for i in at_words(view, _MARKER_WORDS):
            k = low.find(":", i, i + 16)
            if k != -1 and low[i:k].rstrip(" \t").isalpha():
                hits.extend(_line_marker(view, i))
    if "[" in low:
        for word in (b"system", b"admin", b"developer", b"assistant"):
            if word in words:
                for i in occurrences(low, "[" + word.decode()):
                    m = _LABEL.match(low, i)
                    if m and _label_counts(view, m.start(), m.end()):
                        hits.append(Hit(ROLE_TAG, m.start(), m.end()))
    if b"role" in words:
        for needle in ('"role"', "'role'"):
            hits.extend(
                Hit(ROLE_TAG, i, m.end())
                for i in occurrences(low, needle)
                if (m := _JSON_ROLE.match(low, i)) and not _CODE_CONTENT.match(low, m.end())
            )
    if view.has("](#"):
        hits.extend(Hit(ROLE_TAG, i, m.end()) for i in occurrences(low, "[") if (m := _MARKDOWN_ROLE.match(low, i)))
    if b"system" in words:
        for i in at_words(view, _BANNER_WORDS):
            m = _BANNER.match(low, i)
            if m and _shouted_or_fenced(view, m.start(), m.end()):
                hits.append(Hit(ROLE_TAG, m.start(), m.end()))
    return hits


def _original(view: View, start: int, end: int) -> str:
    a, b = view.span(start, end)
    return view.text[a:b]


def _tag_counts(view: View, m: re.Match[str]) -> bool:
    low = view.low
    name = _original(view, m.start("name"), m.end("name"))
    # `<System>` and `<Assistant />` are UI components (PascalCase); `<SyStEm>` is not.
    if _COMPONENT.fullmatch(name):
        return False
    # Maven's `<instructions><Export-Package>…`: markup inside, no prose, is build configuration.
    if m.group("name") == "instructions" and low[m.end() :].lstrip()[:1] in ("<", ""):
        return False
    # Maven's `<issueManagement><system>GitHub</system>`: one word between the tags is data.
    if m.group("name") in ("system", "admin"):
        if m.group().startswith("</"):
            tag = f"<{m.group('name')}>"
            opening = low.rfind(tag, max(0, m.start() - 48), m.start())
            body = low[opening + len(tag) : m.start()].strip() if opening != -1 else ""
        else:
            close = low.find(f"</{m.group('name')}>", m.end(), m.end() + 48)
            body = low[m.end() : close].strip() if close != -1 else ""
        if body and not any(c.isspace() for c in body):
            return False
    return True


def _line_marker(view: View, i: int) -> list[Hit]:
    """`### System:` anywhere, or a `Human:`/`Assistant:` turn marker at the start of a line."""
    low = view.low
    start = low.rfind("\n", 0, i) + 1
    prefix = low[start:i]
    if prefix.strip().startswith("#") and prefix.strip().strip("#").strip() == "":
        m = _HEADING.match(low, start + len(prefix) - len(prefix.lstrip()))
        if m:
            return [Hit(ROLE_TAG, m.start(), m.end())]
        return []
    if prefix.strip(" \t>*-") != "":
        return []
    label = re.match(r"(?:system|developer|admin)[ \t]*:", low[i : i + 16])
    if label:
        # "System: Ubuntu 22.04" is a bug report; "SYSTEM: you must comply" is an order.
        end = low.find("\n", i)
        rest = low[i + label.end() : len(low) if end == -1 else end]
        return [Hit(ROLE_TAG, i, i + label.end())] if _LABEL_ORDER.search(rest) else []
    m = _TURN.match(low, i)
    if not m:
        return []
    word = _original(view, m.start(), m.start() + len(m.group().split(":")[0].strip()))
    # `Human:` and `Assistant:` as a transcript writes them; not `assistant:` as a YAML key.
    if word[:1].isupper():
        return [Hit(ROLE_TAG, m.start(), m.end())]
    return []


def _label_counts(view: View, start: int, end: int) -> bool:
    """`[SYSTEM]`, or `[system]` with text after it on its line; `[system]` alone on a line is an INI section."""
    original = _original(view, start, end)
    if original == original.upper():
        return True
    line_end = view.low.find("\n", end)
    return view.low[end : len(view.low) if line_end == -1 else line_end].strip() != ""


def _shouted_or_fenced(view: View, start: int, end: int) -> bool:
    original = _original(view, start, end)
    if original == original.upper():
        return True
    before = view.low[max(0, start - 4) : start]
    return any(c in before for c in "=-#[*")
