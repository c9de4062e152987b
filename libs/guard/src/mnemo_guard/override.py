"""Instruction overrides: "ignore all previous instructions", "you are now DAN", "new instructions:", and more."""

from __future__ import annotations

import re

from mnemo_guard.model import INSTRUCTION_OVERRIDE
from mnemo_guard.normalize import View, fold_pattern
from mnemo_guard.scan import Hit, anywhere, at_words, compile_folded, occurrences, sentence, wordset

_S = r"[\W_]+"  # any run of spaces, punctuation or underscores: "ignore...previous_instructions"
_VERB = (
    r"(?:ignore|ignoring|disregard|disregarding|forget|forgetting|overrid(?:e|ing)|overrule|bypass|discard|abandon"
    r"|neglect|dismiss|erase|scrap|skip|drop|set\s+aside|put\s+aside|throw\s+(?:out|away)|pay\s+no\s+attention\s+to"
    r"|(?:do\s+not|don'?t|dont|no\s+longer|stop)\s+(?:follow(?:ing)?|obey(?:ing)?|adhere\s+to|comply\s+with)"
    r"|never\s*mind)"
)
# Words that may sit between the verb and the target ("ignore all of the previous ...").
_FILL = r"(?:all|any|every|each|the|of|these|those|this|that|and|or|other|given|above|your|its|such|kinds?|sets?)"
# At least one of these must be there: without it "ignore the lint rules" would match.
_STRONG = (
    r"(?:previous(?:ly)?|prior|preceding|above|foregoing|earlier|former|original|initial|system|developer|safety"
    r"|your|programmed|pre[\W_]?programmed|hidden|default|built[\W_]?in|existing|current|old|ethical|openai|anthropic)"
)
_TARGET = (
    r"(?:instructions?|instruct|directives?|prompts?|rules?|guidelines?|guardrails?|constraints?|restrictions?"
    r"|polic(?:y|ies)|programming|orders|commands|context|training|conditioning|safeguards?|limitations?|filters?"
    r"|moderation|guidance|ethics|principles|boundaries|limits|persona|directions)"
)
_OVERRIDE = re.compile(
    rf"{_VERB}(?:{_S}{_FILL})*?{_S}{_STRONG}(?:{_S}(?:{_FILL}|{_STRONG}))*?{_S}{_TARGET}\b"
    # "ignore all instructions and ...": `all` alone counts when an order follows.
    rf"|{_VERB}{_S}(?:all|any|every)(?:{_S}of)?(?:{_S}the)?{_S}(?:instructions?|directives?|prompts?|guidelines?"
    rf"|guardrails?|restrictions?|safeguards?)\s*(?:[.,;:!-]|$|and\b|then\b|instead\b)"
    # "disregard the instructions above", "forget the rules you were given".
    rf"|{_VERB}(?:{_S}(?:all|any|of|the|your|these|those))*{_S}{_TARGET}{_S}(?:above|before\s+this|so\s+far|(?:you\s+"
    r"(?:were|have\s+been)\s+)?(?:given|told|received)(?:\s+(?:before|earlier|previously))?|previously\s+given)\b"
    # "ignore everything above", "forget everything you were told".
    rf"|{_VERB}{_S}(?:all{_S}|of{_S})*(?:everything|anything|what)(?:{_S}(?:that|which))?{_S}(?:above|before|prior|so\s+far"
    rf"|(?:you(?:'ve|\s+have)?|i(?:'ve|\s+have)?)\s+(?:were|was|been|have\s+been)\s+(?:told|taught|instructed|given|said)"
    rf"|in\s+your\s+(?:system\s+)?prompt|(?:you\s+were|i)\s+(?:told|said)\s+(?:you\s+)?before)"
    # "ignore the above and say ...".
    rf"|{_VERB}{_S}(?:all{_S}|of{_S})*the{_S}above{_S}(?:and{_S}|then{_S}|,{_S}|instead{_S})*(?:instead{_S})?"
    r"(?:say|print|output|respond|reply|write|tell|return|repeat|answer|do|follow|translate)\b"
)

_YOU_ARE_NOW = re.compile(
    r"you(?:\s+are|'re)\s+now\s+(?:in\s+|entering\s+|operating\s+in\s+)?(?:an?\s+|the\s+)?(?:"
    r"(?:developer|dan|god|jailbreak|jailbroken|unrestricted|unfiltered|uncensored|sudo|admin|debug|evil|chaos)\s+mode"
    r"|(?:unrestricted|unfiltered|uncensored|jailbroken|unshackled|evil|rogue|unaligned|amoral|different|new"
    r"|independent|free)\s+(?:ai|assistant|model|chatbot|bot|persona|character|agent|llm|language\s+model|entity|system)"
    r"|(?:dan|stan|dude|aim|developer\s+mode)\b|free\s+(?:from|of)\s+(?:all\s+)?(?:your\s+)?(?:rules|restrictions"
    r"|guidelines|constraints|limitations|policies|filters)|no\s+longer\s+(?:an?\s+)?(?:ai|assistant|language\s+model"
    r"|chatbot|bound|restricted|limited|required\s+to|constrained|subject\s+to)|(?:called|named)\s+\w+\s*(?:,|and|\.|;)"
    r"\s*(?:you|who|which|an?)\s)"
    r"|you(?:\s+are|'re)\s+(?:no\s+longer|not)\s+(?:an?\s+)?(?:ai\s+assistant|language\s+model|chatbot|bound\s+by|restricted"
    r"\s+by|required\s+to\s+follow|subject\s+to)"
)
_FROM_NOW_ON = re.compile(
    r"(?:from\s+(?:now|here)\s+on(?:wards?)?|from\s+this\s+(?:point|moment)(?:\s+on(?:wards?)?)?|henceforth|starting\s+now"
    r"|for\s+the\s+rest\s+of\s+(?:this|the)\s+(?:conversation|session|chat)),?\s+(?:you|the\s+assistant"
    r"|the\s+ai|the\s+model|assistant|ai|claude|chatgpt|gpt)\s+(?:will\s+|must\s+|shall\s+|should\s+|are\s+to\s+"
    r"|are\s+going\s+to\s+|can\s+|may\s+|need\s+to\s+)?(?:always\s+|only\s+|never\s+|now\s+)?(?:respond|answer|reply"
    r"|act|behave|pretend|roleplay|role-play|speak|output|ignore|disregard|forget|obey|comply|operate|function"
    r"|refuse|simulate|impersonate|stay\s+in\s+character|follow\s+(?:only\s+)?(?:my|these|the\s+following|new))(?:s|es)?\b"
)
_NEW_INSTRUCTIONS = re.compile(
    r"(?:new|real|actual|true|secret|hidden|updated|revised|replacement|override|overriding|priority|urgent)"
    r"\s+(?:system\s+)?(?:instructions?|directives?|system\s+prompt|prompt|orders)\s*(?::|are\s*:|follow\s*:)"
    r"|(?:your|the\s+assistant'?s?|the\s+ai'?s?)\s+(?:new|real|actual|true|secret|hidden|updated|revised)\s+(?:system\s+)?"
    r"(?:instructions|directives|system\s+prompt|orders|objective|purpose|task|mission)\s*(?::|is\b|are\b)"
    # "the following overrides any prior instruction", "this note supersedes all previous instructions".
    r"|(?:this|the\s+following|these|the\s+next|my)\s+(?:\w+\s+)?(?:overrides?|supersedes?|replaces?|cancels?|voids?"
    r"|invalidates?|takes\s+precedence\s+over)\s+(?:any|all|every|the)\s+(?:\w+\s+)?(?:prior|previous|earlier|other"
    r"|system|existing|original)\s+(?:\w+\s+)?(?:instructions?|directives?|prompts?|guidelines|rules)"
    r"|system\s+prompt\s+(?:override|update|injection|replaced)\s*[:!\-]"
    r"|(?:begin|start)\s+(?:of\s+)?(?:new|updated|real|override)\s+(?:system\s+)?(?:instructions|prompt)"
    r"|(?:end|ignore)\s+of\s+(?:system\s+)?(?:prompt|instructions)\s*[.:!\-]"
)
_REVEAL = re.compile(
    r"(?:reveal|print|show|output|repeat|leak|display|dump|disclose|recite|spell\s+out|write\s+out|tell\s+me)\s+"
    r"(?:me\s+|us\s+)?(?:all\s+(?:of\s+)?)?your\s+(?:full\s+|entire\s+|complete\s+|exact\s+|original\s+|hidden\s+"
    r"|initial\s+|secret\s+)*(?:system\s+prompt|system\s+message|instructions|initial\s+prompt|hidden\s+prompt|rules"
    r"|guidelines|prompt)\b"
)
_MODE = re.compile(
    r"(?:enable|activate|enter|switch\s+to|turn\s+on|unlock|engage|initiate)\s+(?:the\s+)?(?:developer|dan|god|jailbreak"
    r"|sudo|unrestricted|unfiltered|uncensored|evil|chaos|opposite)\s+mode"
    r"|(?:developer|dan|god|jailbreak|unrestricted|unfiltered)\s+mode\s+(?:is\s+(?:now\s+)?)?(?:enabled|activated"
    r"|on|engaged|unlocked)"
    r"|(?:dan|jailbreak|stan|dude)\s+mode"
    r"|(?:act|behave|respond|answer|roleplay|pretend\s+to\s+be)\s+as\s+(?:if\s+you\s+(?:are|were)\s+)?(?:an?\s+)?"
    r"(?:unrestricted|unfiltered|uncensored|jailbroken|evil|amoral|unaligned|rogue)\s+(?:ai|assistant|model|chatbot"
    r"|llm|version)"
    r"|pretend\s+(?:that\s+)?you\s+(?:are|have)\s+(?:no\s+(?:rules|restrictions|guidelines|filters|limits)"
    r"|an?\s+(?:unrestricted|unfiltered|uncensored|jailbroken|evil)\b|dan\b|been\s+(?:freed|jailbroken|unlocked))"
    r"|if\s+you\s+are\s+(?:an?\s+)?(?:ai|a\.i\.|llm|large\s+language\s+model|language\s+model|ai\s+assistant|ai\s+agent"
    r"|chatbot|ai\s+model|gpt|assistant)\b(?:\s+(?:reading|processing|parsing|summari[sz]ing|seeing|analy[sz]ing)\b)?"
    r"|(?:ai|llm|language\s+model|ai\s+assistant|ai\s+agent)s?\s+(?:reading|processing|parsing|summari[sz]ing)\s+"
    r"this\s+(?:must|should|will|shall|are\s+to|need\s+to)\b"
)
# "developer mode" alone is Chrome's or Android's; it counts only next to words about an AI's limits.
_AI_CONTEXT = re.compile(
    r"\b(?:chatgpt|assistant|ai|a\.i\.|llm|language\s+model|content\s+polic(?:y|ies)|restrictions|censor\w*|uncensored"
    r"|filters?|guidelines|openai|anthropic|jailbr\w+|any\s+(?:question|request|content))\b"
)

_NON_ENGLISH = compile_folded(
    # German
    r"(?:ignorier(?:e|en|t)?|vergiss|vergessen\s+sie|missachte|übergehe)\s+(?:\w+\s+){0,3}?(?:vorherigen|vorigen"
    r"|bisherigen|obigen|früheren|alle[nms]?|sämtliche|deine|ihre)\s+(?:\w+\s+){0,2}?(?:anweisungen|anleitungen"
    r"|instruktionen|regeln|befehle|vorgaben|richtlinien)"
    # French
    r"|(?:ignore[rz]?|oublie[rz]?|ne\s+tiens?\s+pas\s+compte\s+d)\s*(?:\w+\s+){0,3}?(?:instructions|consignes|règles"
    r"|directives|indications)\s+(?:précédentes|antérieures|ci-dessus|d'avant|initiales|du\s+système)"
    # Spanish
    r"|(?:ignora|ignore|ignorar|ignorad|olvida|olvide|olvidar|descarta|omite)\s+(?:\w+\s+){0,3}?(?:instrucciones"
    r"|reglas|indicaciones|directrices|órdenes)\s+(?:anteriores|previas|de\s+arriba|iniciales|del\s+sistema)"
    # Italian
    r"|(?:ignora|ignorate|dimentica|dimenticate|trascura)\s+(?:\w+\s+){0,3}?(?:istruzioni|regole|indicazioni"
    r"|direttive)\s+(?:precedenti|di\s+sopra|iniziali|del\s+sistema)"
    # Portuguese
    r"|(?:ignore|ignora|esqueça|esqueca|desconsidere)\s+(?:\w+\s+){0,3}?(?:instruções|regras|orientações|diretrizes)"
    r"\s+(?:anteriores|prévias|acima|iniciais|do\s+sistema)"
    # Dutch
    r"|(?:negeer|vergeet)\s+(?:\w+\s+){0,3}?(?:vorige|eerdere|voorgaande|bovenstaande)\s+(?:instructies|regels"
    r"|aanwijzingen)"
    # Russian
    r"|(?:игнорируй|игнорируйте|проигнорируй|забудь|забудьте|не\s+обращай\s+внимания\s+на)\s+(?:\w+\s+){0,2}?"
    r"(?:предыдущие|прежние|прошлые|вышеуказанные|вышеприведенные|предшествующие|все\s+свои|свои|все)\s+"
    r"(?:\w+\s+)?(?:инструкции|указания|правила|команды|ограничения)"
    # Chinese
    r"|(?:忽略|无视|忘记|忽视|不要理会|忘掉)(?:掉)?(?:你)?(?:之前|以上|上面|前面|先前|此前|所有|全部|一切|原来|原有)(?:的)?"
    r"(?:所有|全部)?(?:的)?(?:指令|指示|说明|规则|提示|设定|限制)"
    # Japanese
    r"|(?:以前|前|上記|これまで|先)の(?:すべての|全ての)?(?:指示|命令|ルール|指令)(?:を|は)(?:すべて|全て)?(?:無視|忘れ)"
    # Korean
    r"|(?:이전|위의|앞의)\s*(?:모든\s*)?(?:지시|명령|지침|규칙)(?:을|를|은|는)?\s*(?:무시|잊어)"
)

_VERBS = wordset(
    "ignore ignoring disregard disregarding forget forgetting override overriding overrule bypass discard abandon",
    "neglect dismiss erase scrap skip drop aside throw pay follow following obey obeying adhere comply mind nevermind",
)
_TARGETS = wordset(
    "instruction instructions prompt prompts directive directives orders objective purpose task mission guidelines",
    "rules",
)
# "The assistant no longer has safety restrictions", "an AI without any filters".
_UNBOUND = re.compile(
    r"(?:you|the\s+(?:assistant|ai|model|bot)|assistant|ai|llm|chatbot|model)\s+(?:now\s+)?(?:no\s+longer\s+(?:has|have)"
    r"|(?:has|have)\s+no|(?:is|are)\s+(?:no\s+longer|not)\s+(?:bound|restricted|limited|constrained)\s+by|(?:is|are)\s+"
    r"(?:now\s+)?(?:free|exempt|released|freed)\s+from|(?:with\s+no|without(?:\s+any)?))\s+(?:\w+\s+)?(?:restrictions"
    r"|rules|guidelines|filters|limits|limitations|guardrails|censorship|content\s+polic(?:y|ies)|safety\s+\w+|ethics"
    r"|boundaries|constraints)\b"
)
_UNBOUND_WORDS = wordset(
    "restrictions rules guidelines filters limits limitations guardrails censorship policy policies ethics",
    "boundaries constraints",
)
_REVEAL_TARGETS = wordset("prompt instructions rules guidelines message")
_MODE_WORDS = wordset("mode pretend unrestricted unfiltered uncensored jailbroken amoral unaligned rogue")
_NON_ENGLISH_WORDS = wordset(
    "ignoriere ignorieren ignoriert vergiss vergessen missachte ubergehe ignore ignorez ignorer oublie oubliez oublier",
    "ignora ignorar ignorad ignorate olvida olvide olvidar descarta omite dimentica dimenticate trascura esqueca",
    "desconsidere negeer vergeet ne",
)
_CYRILLIC_ANCHORS = tuple(fold_pattern(a) for a in ("игнор", "проигнор", "забуд", "не обращ"))
_CJK_ANCHORS = tuple(
    fold_pattern(a)
    for a in (
        "忽略",
        "无视",
        "忘记",
        "忽视",
        "不要理会",
        "忘掉",
        "以前",
        "上記",
        "これまで",
        "前の",
        "先の",
        "이전",
        "위의",
        "앞의",
    )
)
_AI_READER = (
    "if you are",
    "if you're",
    "reading this",
    "processing this",
    "parsing this",
    "summarizing this",
    "summarising this",
)
_NOW = wordset("now here point moment henceforth rest")
_FROM_NEEDLES = (
    "from now on",
    "from here on",
    "from this point",
    "from this moment",
    "henceforth",
    "starting now",
    "for the rest of",
)
_YOU = wordset("you your")
_AI_WORDS = wordset("ai llm llms assistant model language chatbot gpt agent bot")
WINDOW = 200


def find_overrides(view: View) -> list[Hit]:
    """Every instruction-override phrase in the view."""
    low = view.low
    hits: list[Hit] = []
    words = view.words
    if not words.isdisjoint(_VERBS):
        last = -1
        for i in at_words(view, _VERBS, identifiers=True):
            if i < last or not _plausible(low, i):
                continue
            # The phrase may start a word or two before its anchor ("do not follow", "pay no attention").
            m = _OVERRIDE.search(low, max(0, i - 16), i + WINDOW)
            if m and m.start() <= i < m.end():
                hits.append(Hit(INSTRUCTION_OVERRIDE, m.start(), m.end()))
                last = m.end()
    for needle in ("you are", "you're") if b"you" in words else ():
        if needle in low:
            hits.extend(
                Hit(INSTRUCTION_OVERRIDE, i, m.end())
                for i in occurrences(low, needle)
                if (m := _YOU_ARE_NOW.match(low, i))
            )
    for needle in _FROM_NEEDLES if not words.isdisjoint(_NOW) else ():
        if needle in low:
            hits.extend(
                Hit(INSTRUCTION_OVERRIDE, i, m.end())
                for i in occurrences(low, needle)
                if (m := _FROM_NOW_ON.match(low, i))
            )
    if not words.isdisjoint(_TARGETS):
        for i in at_words(view, _TARGETS):
            # "new instructions:", "your real instructions are", "system prompt override:" all end near here.
            tail, head = low[i : i + 40], low[max(0, i - 60) : i]
            if not (
                ":" in tail
                or " is" in tail
                or " are" in tail
                or "begin" in head
                or "start" in head
                or "end" in head
                or "over" in head
                or "supersede" in head
                or "replace" in head
                or "cancel" in head
                or "void" in head
                or "preceden" in head
            ):
                continue
            m = _NEW_INSTRUCTIONS.search(low, max(0, i - 80), i + 40)
            if m and m.start() <= i < m.end():
                hits.append(Hit(INSTRUCTION_OVERRIDE, m.start(), m.end()))
    if b"your" in words and not words.isdisjoint(_REVEAL_TARGETS):
        for i in at_words(view, _REVEAL_TARGETS):
            m = _REVEAL.search(low, max(0, i - 80), i + 20)
            if m and m.start() <= i < m.end():
                hits.append(Hit(INSTRUCTION_OVERRIDE, m.start(), m.end()))
    if not words.isdisjoint(_UNBOUND_WORDS) and not words.isdisjoint(_AI_WORDS | _YOU):
        for i in at_words(view, _UNBOUND_WORDS):
            m = _UNBOUND.search(low, max(0, i - 90), i + 20)
            if m and m.start() <= i < m.end():
                hits.append(Hit(INSTRUCTION_OVERRIDE, m.start(), m.end()))
    if not words.isdisjoint(_MODE_WORDS) or (not words.isdisjoint(_AI_WORDS) and any(n in low for n in _AI_READER)):
        hits.extend(_modes(view))
    starts = at_words(view, _NON_ENGLISH_WORDS) if not words.isdisjoint(_NON_ENGLISH_WORDS) else []
    # An order needs a dozen Cyrillic letters, or five Chinese/Japanese/Korean ones; a stray one is a name.
    if view.scripts.get("cyrillic", 0) >= 12:
        starts += anywhere(low, _CYRILLIC_ANCHORS)
    if view.scripts.get("cjk", 0) >= 5:
        starts += anywhere(low, _CJK_ANCHORS)
    if starts:
        for i in starts:
            m = _NON_ENGLISH.match(low, i)
            if m:
                hits.append(Hit(INSTRUCTION_OVERRIDE, m.start(), m.end()))
    return hits


_NEEDS_NEGATION = ("follow", "obey", "adhere", "comply")


def _plausible(low: str, i: int) -> bool:
    """Cheap checks for the verbs that count only inside a phrase ("do not follow", "never mind", "set aside")."""
    word = low[i : i + 9]
    if word.startswith(_NEEDS_NEGATION):
        before = low[max(0, i - 12) : i]
        return "not" in before or "n't" in before or "dont" in before or "stop" in before or "longer" in before
    if word.startswith("mind"):
        return low[max(0, i - 7) : i].rstrip().endswith("never")
    if word.startswith("aside"):
        return low[max(0, i - 5) : i].rstrip().endswith(("set", "put"))
    if word.startswith("pay"):
        return low.startswith(" no attention", i + 3)
    if word.startswith("throw"):
        return low.startswith((" out", " away"), i + 5)
    return True


def _modes(view: View) -> list[Hit]:
    low = view.low
    hits: list[Hit] = []
    starts = set(at_words(view, _MODE_WORDS))
    starts.update(i for n in _AI_READER for i in occurrences(low, n))
    last = -1
    for i in sorted(starts):
        if i < last:
            continue
        m = _MODE.search(low, max(0, i - 80), i + 120)
        if not m or not m.start() <= i + 12 or m.end() <= i:
            continue
        text = m.group()
        if "developer" in text and "dan" not in text and "jailbreak" not in text:
            start, end = sentence(low, m.start(), m.end())
            window = low[max(0, start - 200) : min(len(low), end + 200)]
            if not _AI_CONTEXT.search(window):
                continue
        hits.append(Hit(INSTRUCTION_OVERRIDE, m.start(), m.end()))
        last = m.end()
    return hits
