"""The prompt-injection screen: does a question hold text written to steer a language model?

Contract: ``screen(text)`` returns ``None`` or the first ``InjectionHit`` (the name of the
pattern that matched, and whether it matched text decoded from base64). It is a pure
function of the text: no state, no I/O, linear in the text's length for the question sizes
``/ask`` accepts. ``injection_pattern(text)`` is the hit's pattern name, or ``None``.

What the patterns see (``views``) is the text written several ways, so that a spelling meant
to step around a word boundary lands on one of them:

- ``plain``: NFKC, case folded, format characters (zero-width, joiners, bidi controls, tag
  characters, soft hyphen) removed, whitespace runs collapsed. Markup (``<script>``,
  ``<|im_start|>``) is matched here.
- ``folded`` (``i`` and ``l`` variants): the plain view with accents and combining marks
  removed, Cyrillic and Greek look-alikes written as the Latin letter they imitate, digits and
  symbols inside a word read as letters (``0``-o, ``1``-i or l, ``3``-e, ``4``-a, ``5``-s,
  ``7``-t, ``@``-a, ``$``-s), separators between letters (``_ . - * / + ~``) read as spaces,
  and runs of three or more single letters joined (``i g n o r e`` is ``ignore``).
- ``joined`` (both variants): as ``folded`` but separators between letters removed, so a
  word broken by hyphens (``ign-ore``) is whole again.

A run that looks like base64 (at least 16 characters of the alphabet, valid padding, decoding
to text that is at least 90% printable ASCII) is decoded and screened too, two levels deep.

Patterns are written so that words may run together (``\\s*`` between them), which catches
text whose spaces were removed, and each is narrowed until questions about HTTP that use
the same words pass: "a recipient MUST ignore unrecognized directives", "the previous
response", "Cache-Control instructions", "a proxy can act as a tunnel", "does RFC 6265
override the previous rules". ``eval/injection.yaml`` holds both lists and
``tests/answering/test_injection_screen.py`` holds the screen to them.

This is a tripwire for known phrasings, not a defence against paraphrase: see
``docs/threat-model.md`` for what it cannot catch and why the served path does not depend on it.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import unicodedata
from dataclasses import dataclass


@dataclass(frozen=True)
class InjectionPattern:
    name: str
    regex: str  # matched case-insensitively against every view of the question


@dataclass(frozen=True)
class InjectionHit:
    pattern: str
    in_base64: bool = False

    def describe(self) -> str:
        where = " in base64-decoded text" if self.in_base64 else ""
        return f"the question matches the injection pattern {self.pattern!r}{where}"


# Verbs that set an instruction aside, and the words between such a verb and its object.
_SET_ASIDE = (
    r"(?:ignore|disregard|forget|overrid(?:e|ing)|overrule|bypass|skip|discard|abandon|dismiss|neglect|erase|"
    r"throw\s*away|set\s*aside|stop\s*following|do\s*not\s*follow|don'?t\s*follow|no\s*longer\s*follow|"
    r"pay\s*no\s*attention\s*to|never\s*mind)"
)
_FILLER = r"(?:(?:all|any|the|of|these|those|my|every|each|whatever)\s*)*"
# Where an instruction sits: the conversation, not the protocol ("previous" alone is HTTP's
# word too, so it qualifies only the objects that are about a model).
_QUALIFIER = (
    r"(?:previous|prior|above|earlier|preceding|foregoing|original|initial|old|system|developer|hidden|secret|"
    r"given|current|existing|your|all)"
)
# Objects that name a model's instructions whatever the qualifier.
_MODEL_OBJECT = r"(?:instructions?|prompts?|guidelines|programming|guardrails|training|system\s*messages?)"
# Objects that are also protocol words (rules, directives, context): only when they are "yours"
# or sit in the conversation ("above", "system", "original").
_OWN_QUALIFIER = r"(?:your|above|system|original|initial|hidden|secret|developer)"
_SHARED_OBJECT = (
    r"(?:rules|directives|directions|context|restrictions|constraints|limitations|filters|policies|"
    r"commands|orders|conversation|messages?|text|settings)"
)
_YOU_WERE_TOLD = (
    r"(?:you\s*(?:were|was|have\s*been|'ve\s*been|ve\s*been|had\s*been|got|are)\s*"
    r"(?:told|taught|instructed|programmed|given|trained|asked))"
)
# Each spelling ends at a word boundary: "ur" is "you're" only as a word of its own, never the
# start of URL, URI or URN (nor "you r" the start of "your").
_YOU_ARE = r"(?:you\s*(?:are|'re|re|r)|ur|you'?ll\s*be|you\s*will\s*be)\b"
_PERSONA = (
    r"(?:ai|assistant|chatbot|bot|language\s*model|llm|gpt|chatgpt|dan|unrestricted|unfiltered|uncensored|"
    r"jailbroken|evil|linux\s*terminal|root\s*shell|grandma|grandmother|hacker|developer\s*mode|"
    r"god\s*mode|another\s*(?:ai|model))"
)

# Data, not code: each entry names a family of text written to steer a language model.
INJECTION_PATTERNS: tuple[InjectionPattern, ...] = (
    InjectionPattern(
        "ignore_instructions",
        rf"\b{_SET_ASIDE}\s*{_FILLER}(?:(?:{_QUALIFIER})\s*(?:of\s*)?{_FILLER})+(?:the\s*)?{_MODEL_OBJECT}\b"
        rf"|\b{_SET_ASIDE}\s*{_FILLER}(?:{_OWN_QUALIFIER})\s*{_FILLER}{_SHARED_OBJECT}\b"
        rf"|\b(?:ignore|disregard|forget)\s*{_FILLER}(?:previous|prior|earlier)\s*(?:rules|directions|context|conversation|messages?)\b"
        rf"|\b{_SET_ASIDE}\s*{_FILLER}(?:your\s*)?{_MODEL_OBJECT}\s*"
        rf"(?:and\b|,|;|\.|:|above|before|so\s*far|{_YOU_WERE_TOLD}|you\s*(?:have|got|received))",
    ),
    InjectionPattern(
        "forget_everything",
        rf"\b{_SET_ASIDE}\s*(?:about\s*)?(?:everything|anything|all|what(?:ever)?|all\s*that)\s*(?:that\s*)?"
        rf"(?:{_YOU_WERE_TOLD}|(?:you\s*)?(?:know|learned)|above|before\s*(?:this|that|now|my|here)|so\s*far|up\s*to\s*now|i\s*said|"
        r"(?:said|written|stated)\s*(?:above|before))",
    ),
    InjectionPattern(
        "instructions_revoked",
        rf"\b(?:previous|prior|above|earlier|original|old|system|your)\s*{_MODEL_OBJECT}\s*(?:are|were|is|have\s*been|has\s*been)\s*"
        r"(?:now\s*)?(?:void|cancell?ed|revoked|obsolete|null|invalid|no\s*longer|replaced|overridden|lifted|suspended|"
        r"removed|disabled)",
    ),
    InjectionPattern(
        "new_instructions",
        r"\bnew\s*(?:instructions|rules|system\s*prompt|prompt|directives)\s*:"
        r"|\b(?:your|my)\s*(?:new|real|actual|updated|only)\s*(?:instructions|rules|task|role|prompt|job|purpose)"
        r"\s*(?:is|are|:|will\s*be)",
    ),
    InjectionPattern(
        "system_prompt",
        r"\bsystem\s*prompts?\b"
        r"|\byour\s*(?:full\s*|initial\s*|original\s*|hidden\s*|secret\s*|first\s*|real\s*)?(?:prompt|instructions)\b"
        r"|\b(?:initial|hidden|secret|original|pre)\s*-?\s*prompts?\b",
    ),
    InjectionPattern(
        "reveal_prompt",
        r"\b(?:reveal|print|show|repeat|output|leak|dump|display|recite|spell\s*out|write\s*out|tell\s*me)\s*"
        r"(?:me\s*)?(?:back\s*)?(?:all\s*|everything\s*|the\s*(?:text|words|lines|message|content)s?\s*)"
        r"(?:written\s*|that\s*is\s*|that\s*was\s*)?(?:above|before\s*(?:this|my)|prior\s*to\s*this)"
        rf"|\b(?:instructions|rules|prompt|guidelines|directions)\s*(?:that\s*)?{_YOU_WERE_TOLD}"
        rf"|\bwhat\s*(?:were|have)\s*you\s*(?:been\s*)?(?:told|instructed|programmed|asked)\b",
    ),
    InjectionPattern(
        "role_reassignment",
        rf"\b{_YOU_ARE}\s*now\b(?!\s*(?:being|going|able|required|allowed|expected|seeing|connected|redirected))"
        rf"|\b{_YOU_ARE}\s*no\s*longer\s*(?:an?\s*|bound|restricted|limited|required\s*to\s*follow|{_PERSONA})"
        rf"|\bfrom\s*now\s*on\s*,?\s*(?:you|act|pretend|respond|answer|reply|behave|only|ignore|forget)"
        rf"|\b{_YOU_ARE}\s*(?:an?\s*|the\s*)?(?:\w+\s*){{0,2}}?{_PERSONA}\b(?!\s*(?:server|proxy|cache|client))"
        rf"|\byou\s*(?:will|shall|must|should)\s*(?:now\s*)?(?:act|behave|respond|answer|reply|speak)\s*(?:as|like)\b",
    ),
    InjectionPattern(
        "act_as",
        r"\b(?:act|behave|respond|answer|reply|roleplay|role\s*-?\s*play|pose|masquerade|speak)\s*(?:as|like)\s*"
        rf"(?:if\s*you\b|though\s*you\b|(?:an?\s*|the\s*|my\s*)?(?:\w+\s*){{0,2}}?{_PERSONA}\b)"
        r"|\brole\s*-?\s*play(?:ing)?\b(?!\s*(?:by|in|of))"
        r"|(?:^|[.!?;:,]\s*|\b(?:please|now|and|just|you|let'?s|lets|i\s*want\s*you\s*to)\s*)pretend\b"
        r"|\bpretend\s*(?:you\s*(?:are|'re|re)|that\s*you|you\s*have|to\s*be\s*(?:an?\s*)?(?:\w+\s*){0,2}?"
        rf"{_PERSONA}\b)",
    ),
    InjectionPattern(
        "jailbreak",
        r"\bjail\s*-?\s*br[eo]a?k(?:s|ing|en|ed)?\b"
        r"|\b(?:developer|jailbreak|dan|god|unrestricted|evil|chaos)\s*mode\b"
        r"|\bdo\s*anything\s*now\b"
        r"|\bdan\s*(?:prompt|\d)"
        r"|\b(?:without|no|ignore|bypass|disable|remove|turn\s*off|lift|drop)\s*(?:any\s*|all\s*|the\s*)*"
        r"(?:your\s*|safety\s*|content\s*|ethical\s*|moral\s*)+(?:restrictions|filters|filtering|guardrails|rules|"
        r"limitations|guidelines|policies|censorship)\b",
    ),
    InjectionPattern("script_tag", r"<\s*/?\s*script\b"),
    InjectionPattern(
        "chat_markup",
        r"<\|?\s*(?:im_start|im_end|system|endoftext)\s*\|?>|\[/?inst\]|<<\s*/?sys\s*>>"
        r"|(?:^|#+\s*|\[\s*)(?:system|assistant|developer)\s*\]?\s*:"
        r"|\b(?:begin|end)\s*(?:system\s*)?instructions\b",
    ),
)

Compiled = tuple[tuple[str, re.Pattern[str]], ...]


@functools.cache
def _compiled() -> tuple[Compiled, Compiled]:
    """The patterns as written, and as the skeleton views read them; compiled on the first
    question screened, not at import (about 18 ms of a server's start)."""
    ordinary = tuple((p.name, re.compile(p.regex, re.IGNORECASE)) for p in INJECTION_PATTERNS)
    # No pattern holds an escape with an "l" in it, so the substitution touches only literal letters.
    skeleton = tuple((p.name, re.compile(p.regex.replace("l", "i"), re.IGNORECASE)) for p in INJECTION_PATTERNS)
    return ordinary, skeleton


# Characters that are not letters but are read as one inside a word (leetspeak). "1" stands
# for i or for l, so the skeleton views read i, l and 1 as one letter, against patterns whose
# every "l" is written "i" (``_compiled``).
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"})
_I_OR_L = str.maketrans({"l": "i"})
# Cyrillic and Greek letters (lower case: the views are case folded first) that look like a
# Latin one, and a few Latin letters that look like another.
_CONFUSABLE = str.maketrans(
    {
        # Cyrillic
        "а": "a", "в": "b", "е": "e", "ё": "e", "з": "3", "і": "i", "ї": "i", "ј": "j", "к": "k",
        "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s",
        "ԁ": "d", "ԛ": "q", "ԝ": "w", "һ": "h", "ӏ": "l", "ɡ": "g", "ү": "y", "ԍ": "g",
        # Greek
        "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
        "τ": "t", "υ": "u", "χ": "x", "γ": "y", "μ": "u", "ω": "w", "ϲ": "c", "ς": "s", "σ": "o",
        # Latin look-alikes and Armenian
        "ı": "i", "ł": "l", "ø": "o", "ƒ": "f", "օ": "o", "ս": "u", "ց": "g",
    }
)  # fmt: skip
# Format characters that NFKC keeps and category Cf does not cover (Hangul fillers, braille blank).
_BLANK = dict.fromkeys(map(ord, "\u115f\u1160\u3164\uffa0\u2800"))
_SEPARATOR = r"[_.\-*/+~·•|:,'`^=]+"
_BETWEEN_LETTERS = re.compile(rf"(?<=[a-z]){_SEPARATOR}(?=[a-z])")
_SINGLE_LETTERS = re.compile(r"\b[a-z](?: [a-z]\b){2,}")
_WORDISH = re.compile(r"\S+")
_INSIDE_WORD_I = re.compile(r"(?<=\w)[|!](?=\w)")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9_-]{16,}={0,2}")
_BASE64_DEPTH = 2


def _strip_format(text: str) -> str:
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf").translate(_BLANK)


def normalise(text: str) -> str:
    """The plain view: NFKC, case folded, format characters removed, whitespace runs collapsed."""
    text = _strip_format(unicodedata.normalize("NFKC", text)).casefold()
    return re.sub(r"\s+", " ", text).strip()


def _deaccent(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _leet(text: str) -> str:
    # Only inside a word that has a letter: "HTTP/1.1" may change, "100" and "4 a" do not.
    return _WORDISH.sub(lambda m: m.group().translate(_LEET) if re.search(r"[a-z]", m.group()) else m.group(), text)


def _join_single_letters(text: str) -> str:
    return _SINGLE_LETTERS.sub(lambda m: m.group().replace(" ", ""), text)


def _spellings(letters: str) -> list[str]:
    """Separators between letters read as a space (then single letters joined), and removed."""
    spaced = re.sub(r"\s+", " ", _BETWEEN_LETTERS.sub(" ", letters))
    return [_join_single_letters(spaced), _join_single_letters(_BETWEEN_LETTERS.sub("", letters))]


def views(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The spellings of ``text`` the patterns are matched against: the plain view and the folded
    ones, then the skeleton ones (i, l and 1 as one letter). No spelling is repeated."""
    plain = normalise(text)
    folded = _leet(_deaccent(plain).translate(_CONFUSABLE))
    skeleton = _INSIDE_WORD_I.sub("i", folded).translate(_I_OR_L)
    ordinary = tuple(dict.fromkeys([plain, *_spellings(folded)]))
    return ordinary, tuple(dict.fromkeys(_spellings(skeleton)))


def _decoded_runs(text: str) -> list[str]:
    """The text that base64-looking runs of ``text`` decode to, when it is mostly printable."""
    found = []
    for run in _BASE64_RUN.findall(unicodedata.normalize("NFKC", _strip_format(text))):
        body = run.rstrip("=")
        if len(body) % 4 == 1:
            continue  # no base64 string has this length
        padded = body + "=" * (-len(body) % 4)
        alphabet = b"-_" if ("-" in body or "_" in body) else b"+/"
        try:
            raw = base64.b64decode(padded, altchars=alphabet, validate=True)
            decoded = raw.decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            continue
        printable = sum(ch.isprintable() and ord(ch) < 128 or ch in "\t\n\r" for ch in decoded)
        if len(decoded) >= 8 and printable >= 0.9 * len(decoded):
            found.append(decoded)
    return found


def _match(text: str) -> str | None:
    ordinary, skeleton = views(text)
    as_written, as_skeleton = _compiled()
    for spellings, patterns in ((ordinary, as_written), (skeleton, as_skeleton)):
        for view in spellings:
            for name, rx in patterns:
                if rx.search(view):
                    return name
    return None


def screen(text: str) -> InjectionHit | None:
    """The first pattern ``text`` matches in any of its views, or in what a base64 run of it
    decodes to (two levels deep); ``None`` when nothing matches."""
    if (name := _match(text)) is not None:
        return InjectionHit(name)
    pending = _decoded_runs(text)
    for _ in range(_BASE64_DEPTH):
        deeper: list[str] = []
        for decoded in pending:
            if (name := _match(decoded)) is not None:
                return InjectionHit(name, in_base64=True)
            deeper += _decoded_runs(decoded)
        pending = deeper
    return None


def injection_pattern(text: str) -> str | None:
    """The name of the first pattern ``text`` matches (``screen``), or None."""
    hit = screen(text)
    return None if hit is None else hit.pattern
