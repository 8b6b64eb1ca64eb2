"""What a question asks for, and what it is about: answer types, focus and unknown subjects.

Classical question answering, with no model: the answer a question wants has a kind (a number,
a status code, a name, ...), and an answer that holds no instance of that kind does not answer
it, however well its sentences match the question's words. A question also has a focus, the
words that name what it is asked about, apart from the engineer's own situation ("Our CDN ...",
"my parser"). Three rules follow, each deterministic:

- **Answer type.** Each question asked is classified (``classify``). An answer stands only if,
  for every type asked for, a kept claim that mentions the question's focus holds an instance
  of it (``missing_types``): a digit or a number word that gives a quantity for ``number`` (not
  "one or more", a list item's "1." or a status code written as one; in the unit asked for, and
  beside what a "how many" counts: "how many bits" is not answered by "4096 bytes"), a
  three-digit status code for ``status_code``, a name shaped like a protocol element for
  ``name``, one of the options offered for ``choice``. ``yes_no``, ``procedure``,
  ``definition`` and ``other`` are satisfied by any claim.
- **Unknown subject.** A focus word that English rarely uses (Zipf frequency below
  ``RARE_ZIPF``), that is no number, host or path, and that no answering section of the corpus
  contains (nor a word sharing its stem, ``text.lexicon``) names something the corpus does not
  cover, whatever its shape ("hpack", "jwt", "Brotli"). So does a capitalised word that does not
  open its sentence ("Do Safari and Chrome ...?"), an element named by its kind that the corpus
  never names so ("the immutable directive"), a capitalised name of two words
  ("JSON Pointer") or a name with a version ("TLS 1.3") that no answering section contains,
  and an element the scenario names by its kind when an asking sentence refers back to it
  ("... in a Sunset response header. What format does that header use?").
  The question is refused, naming it.
- **Focus.** An answer none of whose kept claims (or the titles of the sections they cite)
  mentions a focus word does not stand.

Words in the engineer's scenario are left out of the focus: sentences that ask nothing, the
words a possessive introduces ("our nginx", "my serializer"), quoted text and the values of a
header written out ("Allow: GET, PROPFIND").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from rag_contract.text.english import Frequency
from rag_contract.text.lexicon import STEM, Lexicon, unsaid
from rag_contract.text.words import content_words, tokens, without_references

RARE_ZIPF = 2.3  # below this, a word is a name English barely uses ("jwt" 2.0, "nginx" 2.2, "backend" 2.9)


class AnswerType(StrEnum):
    NUMBER = "number"  # a number, duration or size
    STATUS_CODE = "status_code"
    NAME = "name"  # a field, directive, attribute, parameter or method name
    CHOICE = "choice"  # one of the options the question offers
    YES_NO = "yes_no"
    PROCEDURE = "procedure"
    DEFINITION = "definition"
    OTHER = "other"

    @property
    def wants(self) -> str:
        """What an instance of this type is, for a reason shown to a reader."""
        return _WANTS.get(self, "")


_WANTS = {
    AnswerType.NUMBER: "a number",
    AnswerType.STATUS_CODE: "a status code",
    AnswerType.NAME: "a name",
    AnswerType.CHOICE: "one of the options",
}


@dataclass(frozen=True)
class Asked:
    """What the question asks for (one type per interrogative sentence, in order) and what it is
    about (focus words as content words, in question order), and the subjects the corpus lacks."""

    types: tuple[AnswerType, ...]
    focus: tuple[str, ...]
    unknown: tuple[str, ...]  # focus names the corpus never covers, as the question writes them
    options: tuple[str, ...] = ()  # for a choice: the content words of the options offered
    given: tuple[str, ...] = ()  # the numbers the question itself writes: repeating one answers nothing
    units: tuple[str, ...] = ()  # the measures a number is asked in ("time", "size"): "how many seconds"
    counted: tuple[str, ...] = ()  # what "how many" counts, when no unit: "how many decimal places"

    @property
    def answer_type(self) -> AnswerType:
        """The type the first interrogative sentence asks for: the one a reader is shown."""
        return self.types[0] if self.types else AnswerType.OTHER

    def as_dict(self) -> dict:
        return {
            "answer_type": self.answer_type.value,
            "types": [t.value for t in self.types],
            "focus": list(self.focus),
            "unknown": list(self.unknown),
        }


# --- sentences and scenario ---------------------------------------------------------------

# A sentence ends at ., ? or ! followed by white space and a capital, a quote or a digit, or at
# the end of the text; "e.g. the" and "example.com" do not end one.
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+(?=[A-Z0-9\"'(])")
_AUX = (
    r"is|are|was|were|am|can|could|may|might|must|shall|should|will|would|does|do|did|has|have|had"
    r"|isn't|aren't|can't|doesn't|don't|won't|shouldn't|mustn't"
)
_STARTS_AUX = re.compile(rf"^(?:{_AUX})\b", re.IGNORECASE)


def sentences(question: str) -> list[str]:
    """The question's sentences, each without the words that only lead into it ("So", "And")."""
    return [_LEAD_IN.sub("", t.strip()) for t in _SENTENCE_END.split(question.strip()) if t.strip()]


def interrogatives(question: str) -> list[str]:
    """The sentences that ask something: those ending in '?', or the last sentence when none does."""
    sentences = [s.strip() for s in _SENTENCE_END.split(question.strip()) if s.strip()]
    asked = [s for s in sentences if s.endswith("?")]
    return asked or sentences[-1:]


# Spans of the scenario inside an asking sentence: quoted text, the value of a header written
# out, up to the clause that asks or the next header ("Allow: GET, PUT, PROPFIND, should ...":
# the field's name stays, it is what the question is about), examples, and the words a
# possessive introduces ("our reverse proxy", "my JSON serializer").
_QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'|`[^`]*`|\u201c[^\u201d]*\u201d|\u2018[^\u2019]*\u2019")
_FIELD_NAME = r"[A-Z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*"
_HEADER_VALUE = re.compile(
    rf"\b({_FIELD_NAME}):\s+[^?]*?"
    rf"(?=,?\s+(?:{_AUX}|what|how|which|why|when|where|who)\b|[?]|$|\s+(?:\w+\s+){{0,2}}{_FIELD_NAME}:\s)"
)
# Examples the engineer gives are their situation too: an aside in brackets, and names after
# "like", "such as", "e.g." ("a shared cache like Varnish or Squid").
_EXAMPLES = re.compile(
    r"\([^()]*\)|\b(?:like|such\s+as|e\.g\.,?|for\s+example,?|for\s+instance,?)\s+"
    r"[A-Z][\w.-]*(?:\s*(?:,|or|and|/)\s*[A-Z][\w.-]*)*"
)
_POSSESSIVE = re.compile(r"\b(?:our|my|your|their|his|her)\s+((?:[\w.-]+\s+)?[\w.-]+)", re.IGNORECASE)


def _scenario_free(sentence: str) -> str:
    sentence = _HEADER_VALUE.sub(r"\1 ", _QUOTED.sub(" ", sentence))
    for pattern in (_EXAMPLES, _POSSESSIVE):
        sentence = pattern.sub(" ", sentence)
    return sentence


# Words every question uses to ask, whatever it asks about: never its focus.
_ASKING = frozenset(
    content_words(
        "what which how why when where who whom whose happen happens mean means meaning allowed allow ok okay "
        "valid correct right wrong way ways need needs supposed best work works handle handled treat treated "
        "say says said exactly actually really still ever standard spec specification rfc rfcs rule rules "
        "require required requires expect expected behave behaviour behavior legal compliant conformant "
        "thing things kind use used using able possible safe safely happen instead else anything something "
        "difference different same case cases example one two get got gets go goes acceptable fine enough "
        "missing wrong conclude matter matters care should would could fix problem issue"
    )
)


# A name in the scenario that an asking sentence refers back to ("... with a Retry-After header.
# Can the value be ...?"): a protocol element's shape, or a word in capitals (HEAD, JSON).
_SCENARIO_NAME = re.compile(
    r"(?<![\w-])(?:[A-Za-z]+(?:-[A-Za-z]+)+|[a-z]+[A-Z]\w*|[A-Z][a-z]+[A-Z]\w*|[A-Z]{2,})(?![\w-])"
)


def _scenario_sentences(question: str, asking: Sequence[str]) -> list[str]:
    """The question's sentences that ask nothing (``asking``: its interrogatives)."""
    return [s for s in _SENTENCE_END.split(question.strip()) if s.strip() not in asking]


def focus(question: str) -> tuple[str, ...]:
    """The content words of the asking sentences, scenario and asking words left out, then the
    names the other sentences use (an asking sentence often refers back to them), in order."""
    asking = interrogatives(question)
    words: dict[str, None] = {}
    for sentence in asking:
        words.update(dict.fromkeys(w for w in content_words(_scenario_free(sentence)) if w not in _ASKING))
    for sentence in _scenario_sentences(question, asking):
        for m in _SCENARIO_NAME.finditer(_scenario_free(sentence)):
            words.update(dict.fromkeys(content_words(m.group(0))))
    return tuple(words)


# --- answer types --------------------------------------------------------------------------

_WH = r"what|which|how|why|when|where|who|whom|whose"
_STATUS = re.compile(
    r"\b(?:status(?:\s+code)?|response\s+code|error\s+code|status\s+line|\dxx)\b",
    re.IGNORECASE,
)
_QUANTITY = (
    r"(?:maximum|minimum|max|min|limit|limits|timeout|time-?out|ttl|size|length|duration|lifetime|number|count"
    r"|upper\s+bound|lower\s+bound|cap|ceiling|threshold|interval|delay|port|figure"
    r"|(?:default|starting|initial)\s+(?:[\w-]+\s+)?value)"
)
# "What's the longest ETag ...": a superlative of size or extent asks for the number that bounds it.
_EXTREME = r"(?:longest|largest|biggest|highest|lowest|shortest|smallest|greatest|fewest)"
# "Roughly how many ...", "At most how many ...": a hedge or a bound before the asking words.
_HEDGE = r"(?:(?:roughly|approximately|about|around|exactly|precisely|at\s+most|at\s+least)\s+)?"
# A preposition of a bound or a span before the asking words: "above what size", "for how long".
_BOUND_BY = r"(?:above|below|beyond|over|past|up\s+to|after|for|within|in|by|until|at)"
_NUMBER = re.compile(
    r"^" + _HEDGE + r"(?:how\s+(?:many|much|long|often|big|large|small|deep|far|old|soon|frequently|high|low|fast"
    r"|quickly)\b"
    r"|(?:what|which)(?:'s|\s+is|\s+are)?\s+(?:the\s+|a\s+|an\s+)?(?:[\w-]+\s+){0,2}?" + _QUANTITY + r"\b"
    r"|(?:what|which)(?:'s|\s+is|\s+are)?\s+(?:the\s+)?" + _EXTREME + r"\b"
    # "the most cookies", "the fewest members": most of a plural noun counts ("the most common way" does not)
    r"|(?:what|which)(?:'s|\s+is|\s+are)?\s+(?:the\s+)?(?:most|fewest)\s+[a-z-]+[^sui\W]s\b"
    r"|up\s+to\s+(?:what|which|how)\b|" + _BOUND_BY + r"\s+how\s+(?:many|much|long)\b"
    r"|(?:above|below|beyond|over|past)\s+(?:what|which)\b"
    r"|at\s+what\s+(?:size|age|point|length|rate)\b)",
    re.IGNORECASE,
)
# A yes-or-no question whether there is a limit, a default or a timeout asks for the number.
_IS_THERE_A_NUMBER = re.compile(
    r"^(?:is|are)\s+there\s+(?:a|an|any)\s+(?:(?!to\b)[\w-]+\s+){0,2}?(?:" + _QUANTITY + r"|default)\b",
    re.IGNORECASE,
)
_NAME = re.compile(
    r"^(?:which|what)\s+(?:(?!(?:" + _AUX + r"|a|an|the)\b)[\w-]+\s+){0,2}?"
    r"(?:header(?:\s+field)?|field|directive|attribute|parameter|method|keyword|scheme|prefix|flag|"
    r"media\s+type|content\s+type|member|argument|class|function|setting|variable)s?\b",
    re.IGNORECASE,
)
_CHOICE = re.compile(r"\b(?P<a>[\w%+./'-]+)\s+or\s+(?:a\s+|an\s+|the\s+)?(?P<b>[\w%+./'-]+)\s*[?,]", re.IGNORECASE)
_PROCEDURE = re.compile(
    r"^(?:how\b|what\s+(?:are\s+the\s+)?(?:exact\s+)?(?:steps|algorithm|procedure|process)\b|in\s+what\s+order\b)",
    re.IGNORECASE,
)
_DEFINITION = re.compile(r"^(?:what(?:'s|\s+is|\s+are|\s+does|\s+do)\b|what\s+exactly\b|define\b)", re.IGNORECASE)
_LEAD_IN = re.compile(r"^(?:(?:and|but|so|then|also|now|or|if\s+so|in\s+that\s+case)[,\s]+)+", re.IGNORECASE)
# A clause opened by a condition or a circumstance asks after its comma: "If the origin fails,
# may ...", "At minimum, how many ...", "For a 304, which ...".
_PREAMBLE = re.compile(
    r"^(?:if|when|whenever|after|before|once|since|although|though|while|given|with|for|in|at|on|by|"
    r"without|over|under|halfway|besides)\b[^,?]*,\s*(?=(?:"
    + _AUX
    + "|"
    + _WH
    + r"|"
    + _BOUND_BY
    + r"\s+(?:how|what|which))\b)",
    re.IGNORECASE,
)
# An asking sentence that asks two things: "how long ..., and what status ...?"
# (After a bare comma, "which", "where", "when" and "who" open a relative clause, not a question.)
_SECOND_QUESTION = re.compile(
    r"(?:[,;]\s*(?:and|or|but)\s+|;\s*|,\s*(?=(?:what|how|why|" + _AUX + r")\b))(?=(?:" + _WH + "|" + _AUX + r")\b)",
    re.IGNORECASE,
)


def clauses(sentence: str) -> list[str]:
    """The questions one asking sentence asks, each from where it starts asking."""
    first, *rest = _SECOND_QUESTION.split(sentence)
    if not rest:
        return [_PREAMBLE.sub("", _LEAD_IN.sub("", sentence.strip()))]
    first = _PREAMBLE.sub("", _LEAD_IN.sub("", first.strip()))
    # a first part that asks nothing ("With stale-while-revalidate, how long ...") is a preamble
    asks = re.match(rf"(?:{_WH}|{_AUX}|{_BOUND_BY}\s+(?:how|what|which))\b", first, re.IGNORECASE)
    return ([first] if asks else []) + [r.strip() for r in rest]


def clause_type(clause: str) -> AnswerType:
    """The kind of answer one question wants. A clause that opens with an auxiliary verb wants yes
    or no, or one of the options it offers; one that opens with "which" may offer options too;
    a status code, a number and a name are asked for by what the clause names after its
    interrogative word; the rest by how they open."""
    s = clause.strip()
    yes_no = bool(_STARTS_AUX.match(s))
    if _CHOICE.search(s) and (yes_no or re.match(r"^which\b", s, re.IGNORECASE)):
        return AnswerType.CHOICE
    if _IS_THERE_A_NUMBER.match(s):
        return AnswerType.NUMBER
    if yes_no:
        return AnswerType.YES_NO
    # a clause that opens by asking a quantity wants it even when it names a status as the
    # scenario ("What's the longest ... before answering with a 4xx?")
    if _NUMBER.match(s):
        return AnswerType.NUMBER
    if re.match(rf"^(?:{_WH})\b", s, re.IGNORECASE) and _STATUS.search(s) and not re.match(r"^(?:why|how)\b", s, re.I):
        return AnswerType.STATUS_CODE
    if _NAME.match(s):
        return AnswerType.NAME
    if _PROCEDURE.match(s):
        return AnswerType.PROCEDURE
    if _DEFINITION.match(s):
        return AnswerType.DEFINITION
    return AnswerType.OTHER


def classify(question: str) -> tuple[AnswerType, ...]:
    """One answer type per question asked (a sentence may ask two), in order."""
    return tuple(clause_type(c) for s in interrogatives(question) for c in clauses(s))


def options(question: str) -> tuple[str, ...]:
    """The content words of the options a choice offers ("'+' or '%20'" offers "20")."""
    out: dict[str, None] = {}
    for sentence in interrogatives(question):
        for m in _CHOICE.finditer(sentence):
            out.update(dict.fromkeys(content_words(f"{m.group('a')} {m.group('b')}")))
    return tuple(out)


NUMBER_WORDS = frozenset(
    {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"}
    | {"fifteen", "twenty", "thirty", "forty", "fifty", "sixty", "hundred", "thousand", "million", "billion"}
    | {"once", "twice", "half", "quarter"}
)
# A number, not a version ("HTTP/1.1", "3.6.2", "version 2.0") nor part of a name ("IPv6",
# "rfc9110") nor a reference to an issue ("#2865")
_NUMERAL = re.compile(r"(?<![/\w.#])(?<!version )(?<!Version )\d+(?:[.,]\d+)*(?![\w/])")
# ending a sentence ("... with 404.") but not a decimal ("1.414")
_STATUS_CODE = re.compile(r"(?<![\w.])[1-5]\d\d(?!\w|\.\d)")
# Element shapes: an inner capital (HttpOnly), an inner hyphen or underscore (max-age,
# Set-Cookie), all capitals (GET, ETag's "ETAG"), or a capital after the sentence's first word.
_ELEMENT_NAME = re.compile(r"\b(?:\w+[-_]\w[\w-]*|[a-z]+[A-Z]\w*|[A-Z]{2,}\w*|[A-Z][a-z]+[A-Z]\w*)\b")
_MID_CAPITAL = re.compile(r"(?<=[a-z,;:] )[A-Z][a-z]+\b")


def numbers(text: str) -> tuple[str, ...]:
    """The numbers ``text`` writes (digits as written, number words in lower case), in order;
    section references are none."""
    text = without_references(text)
    found = [m.group(0) for m in _NUMERAL.finditer(text) if m.group(0).count(".") < 2]
    return tuple(dict.fromkeys(found + [t.lower() for t in tokens(text) if t.lower() in NUMBER_WORDS]))


# Numbers that count nothing: a quantifier idiom ("one or more", "one of", "each one"), "one" as a
# pronoun ("a stale response is one that ..."), a list item's marker ("1. the apparent_age"), and a
# status code written as one ("a 414 (URI Too Long)", "a 416 response"): none says how many, how
# long or how big.
_NO_QUANTITY = re.compile(
    r"\b(?:zero|one)\s+or\s+more\b|\bone\s+of\b|\b(?:any|each|every|no|some|which|the)\s+one\b|\bone\s+another\b"
    r"|\bone\s+(?:that|which|who|whose)\b|\b(?:this|that|another)\s+one\b"
    r"|^\s*\d+\.\s"
    r"|\b[1-5]\d\d(?=\s*\([A-Z]|\s+(?:status|response|responses|code|codes)\b)",
    re.IGNORECASE,
)


def quantities(text: str) -> tuple[str, ...]:
    """The numbers ``text`` writes that give a quantity: ``numbers`` less quantifier idioms, list
    markers and status codes written as such."""
    return numbers(_NO_QUANTITY.sub(" ", text))


def has_instance(answer_type: AnswerType, text: str, choices: Sequence[str] = (), given: Sequence[str] = ()) -> bool:
    """Does ``text`` hold an instance of ``answer_type``? Section references ("see Section
    5.2.2", "RFC 9111") are no instance of anything, and neither is a number the question
    itself gives (``given``): "how long before returning 504?" is not answered by a 504."""
    text = without_references(text)
    if answer_type is AnswerType.NUMBER:
        return any(n not in given for n in quantities(text))
    if answer_type is AnswerType.STATUS_CODE:
        return any(m.group(0) not in given for m in _STATUS_CODE.finditer(text))
    if answer_type is AnswerType.NAME:
        return bool(_ELEMENT_NAME.search(text) or _MID_CAPITAL.search(text) or _QUOTED.search(text))
    if answer_type is AnswerType.CHOICE:
        return not choices or any(w in choices for w in content_words(text))
    return True


ENFORCED = (AnswerType.NUMBER, AnswerType.STATUS_CODE, AnswerType.NAME, AnswerType.CHOICE)


# Units a question can ask a number in, by measure: "how many milliseconds", "the size in bytes".
_UNITS = {
    "time": r"(?:milli|micro|nano)?seconds?|ms|secs?|minutes?|mins|hours?|hrs?|days?|weeks?|months?|years?",
    "size": r"bytes?|octets?|bits?|characters?|chars|kilobytes?|megabytes?|gigabytes?|[kmg]i?b",
}
_ASKED_IN = {m: re.compile(rf"\b(?:{u})\b", re.IGNORECASE) for m, u in _UNITS.items()}
# A number's start: digits not inside a name, a version or a reference, or a number word.
_A_NUMBER = rf"(?:(?<![\w.#/])\d[\d,.]*|\b(?:{'|'.join(sorted(NUMBER_WORDS))}))"
# A measure: a number and, at most two words on, a unit of it.
_MEASURED = {
    m: re.compile(
        rf"{_A_NUMBER}\s*(?:[\w-]+\s+){{0,2}}?(?:{u})\b",
        re.IGNORECASE,
    )
    for m, u in _UNITS.items()
}


def _asking_a_number(question: str) -> list[str]:
    """The clauses of the asking sentences that ask for a number."""
    return [c for s in interrogatives(question) for c in clauses(s) if clause_type(c) is AnswerType.NUMBER]


def units(question: str) -> tuple[str, ...]:
    """The measures the number-asking questions name a unit of ("How many seconds ...?": time)."""
    asked = _asking_a_number(question)
    return tuple(m for m, pattern in _ASKED_IN.items() if any(pattern.search(c) for c in asked))


def measured(text: str, measures: Sequence[str]) -> bool:
    """Does ``text`` give a number in a unit of one of ``measures`` ("30 seconds", "eight octets")?"""
    text = without_references(text)
    return any(_MEASURED[m].search(text) for m in measures)


# What "how many" counts: up to two words and a plural noun after it ("how many 1xx interim
# responses"), or after "maximum number of". Units are left to ``units``; "times" counts
# occurrences, which "once" or "twice" answer.
_COUNTED = re.compile(
    r"\bhow\s+many\s+((?:[\w-]+\s+){0,2}?[a-z][\w-]*[^sui\W]s)\b"
    r"|\b(?:maximum|minimum|max|min)\s+number\s+of\s+((?:[\w-]+\s+)?[a-z][\w-]*[^sui\W]s)\b",
    re.IGNORECASE,
)
# Bits stay counted: "at least 4096 bytes" is a size, and no count of bits.
_NOT_COUNTED = re.compile(rf"^(?!bits?$)(?:{_UNITS['time']}|{_UNITS['size']}|times)$", re.IGNORECASE)
COUNTED_WITHIN = 5  # words between a number and what it counts: "three digits after the decimal point"
_QUANTITY_WORD = rf"{_A_NUMBER}\b"
_NEAR = rf"(?:\W+\w+){{0,{COUNTED_WITHIN}}}?\W+"


def counted(question: str) -> tuple[str, ...]:
    """The words of what the number-asking questions count, when it is no unit ("How many bits
    ...?": bits; "How many decimal places ...?": decimal, places), in order."""
    out: list[str] = []
    for clause in _asking_a_number(question):
        for m in _COUNTED.finditer(clause):
            words = (m.group(1) or m.group(2)).lower().split()
            if not _NOT_COUNTED.match(words[-1]):
                out.extend(words)
    return tuple(dict.fromkeys(out))


def counts(text: str, things: Sequence[str]) -> bool:
    """Does ``text`` give a quantity within ``COUNTED_WITHIN`` words of one of ``things`` (or a
    word sharing its stem: "responses", "response")? "At least 4096 bytes" counts no bits, and a
    number beside some other noun counts nothing the question asked about."""
    text = _NO_QUANTITY.sub(" ", without_references(text))
    for thing in things:
        stem = re.escape(re.sub(r"(?:ies|es|s)$", "", thing)[:STEM])
        # the thing may sit inside a longer word: "max_files=1000", "128-bit"
        if re.search(rf"{_QUANTITY_WORD}{_NEAR}\w*{stem}|{stem}\w*{_NEAR}{_QUANTITY_WORD}", text, re.IGNORECASE):
            return True
    return False


def missing_types(asked: Asked, claims: Iterable[tuple[str, Iterable[str]]]) -> tuple[AnswerType, ...]:
    """The types asked for (a number, a status code, a name, one of the options) that no kept
    claim holds an instance of, tied to the question's focus: ``claims`` are (text, the words it
    says with its cited section's title), and an instance counts only in a claim that mentions a
    focus word (a number about something else answers nothing). The other types are satisfied
    by any claim."""
    wanted = dict.fromkeys(t for t in asked.types if t in ENFORCED)
    if not wanted:
        return ()  # nothing to look for: spare the focus check of every claim
    tied = [text for text, said in claims if mentions_focus(asked, said)]

    def holds(t: AnswerType, text: str) -> bool:
        if not has_instance(t, text, asked.options, asked.given):
            return False
        if t is not AnswerType.NUMBER:
            return True
        # a number asked in a unit is answered by a number in that unit, not by any number near the
        # words; a count, by a number beside what it counts
        return (not asked.units or measured(text, asked.units)) and (not asked.counted or counts(text, asked.counted))

    return tuple(t for t in wanted if not any(holds(t, text) for text in tied))


# --- unknown subjects ---------------------------------------------------------------------

# A candidate name: letters (and inner hyphens), no digit, dot or slash: hosts, paths, numbers
# and literal values are the engineer's data, not a subject.
_NAME_TOKEN = re.compile(r"(?<![\w./@%-])[A-Za-z][A-Za-z-]*[A-Za-z](?![\w/@%]|\.\w)")
# Two capitalised words (or an acronym and a capitalised word), not the sentence's first: "JSON
# Pointer", "Bearer Token"; and a name with a version: "TLS 1.3", "OAuth 2.0", "HTTP/3".
# A capitalised word that does not open its sentence ("Do Safari and Chrome block ...?"): a
# product or a specification, whatever English makes of the word in lower case.
_CAPITALISED = re.compile(r"(?<=[\w,;:)] )([A-Z][a-z]+)(?![\w-])")
# An element named by its kind, in any case: "the immutable directive", "a partitioned attribute".
# The corpus must name it so too, with at most one word between ("private response directive").
_NAMED_KIND = re.compile(
    r"\b(?:the|a|an)\s+([A-Za-z][\w-]*)\s+(directive|attribute|parameter|prefix|keyword|flag)s?\b", re.IGNORECASE
)
# An element the scenario names by its kind ("... in a Sunset response header.") that an asking
# sentence refers back to ("What date format does that header use?"): the question is about it.
_KINDS = r"header|field|attribute|directive|parameter|method|option|coding"
_SCENARIO_KIND = re.compile(
    rf"\b([A-Z][\w-]*|[a-z]+[A-Z]\w*|[a-z]+(?:-[a-z]+)+)\s+(?:(?:response|request)\s+)?({_KINDS})s?\b"
)
_REFERS_BACK = re.compile(
    rf"\b(?:that|this|these|those|such\s+an?|the\s+same)\s+(?:(?:response|request)\s+)?({_KINDS})s?\b",
    re.IGNORECASE,
)
_CAPITALISED_PAIR = re.compile(r"(?<=\w )([A-Z][A-Za-z]+ [A-Z][a-z][A-Za-z]+)\b")
_VERSIONED = re.compile(r"\b([A-Z][A-Za-z]*[A-Z][A-Za-z]* \d+\.\d+|[A-Za-z]{2,}/\d+(?:\.\d+)?)(?![\w.])")


# A status code the question names as one ("status 499", "a 420 response", "count 499s"): a code
# the corpus never writes is no status it defines.
_NAMED_CODE = re.compile(
    r"(?:\b(?:status|code|returns?|returned|returning|respond(?:s|ed|ing)?\s+with|sends?|sending)\s+(?:an?\s+|the\s+)?)"
    r"([1-5]\d\d)(?![\w.])|(?<![\w.])([1-5]\d\d)(?:s\b|\s+(?:status|response|error|code)s?\b)",
    re.IGNORECASE,
)


_INFLECTION = re.compile(r"(?:es|s|ed|d|ing)$")


def english(word: str, frequency: Frequency) -> float:
    """How common ``word`` is in English, or its uninflected form if that is commoner
    ("misbehaves" is rarer than "misbehave")."""
    low = word.lower()
    bare = _INFLECTION.sub("", low)
    if bare == low or len(bare) < 3:
        return frequency(low)
    return max(frequency(low), frequency(bare), frequency(bare + "e"))


def unknown_subjects(question: str, corpus: Lexicon, frequency: Frequency) -> tuple[str, ...]:
    """Names in the asking sentences that English rarely uses and no answering section contains,
    as the question writes them, in order."""
    out: dict[str, None] = {}
    for sentence in interrogatives(question):
        text = _scenario_free(sentence)
        for m in _NAME_TOKEN.finditer(text):
            name = m.group(0)
            if english(name, frequency) < RARE_ZIPF and not corpus.knows(name):
                out.setdefault(name, None)
        for m in _CAPITALISED.finditer(text):
            if not corpus.knows(m.group(1)):
                out.setdefault(m.group(1), None)
        for m in _NAMED_KIND.finditer(text):
            name, kind = m.group(1), m.group(2).lower()
            if not corpus.names(name, kind):
                out.setdefault(name, None)
        for pattern in (_CAPITALISED_PAIR, _VERSIONED):
            for m in pattern.finditer(text):
                if not corpus.says(m.group(1)):
                    out.setdefault(m.group(1), None)
        for m in _NAMED_CODE.finditer(text):
            code = m.group(1) or m.group(2)
            if not corpus.knows(code):
                out.setdefault(code, None)
    out.update(dict.fromkeys(_referred_back(question, corpus)))
    return tuple(out)


def _referred_back(question: str, corpus: Lexicon) -> list[str]:
    """Elements the scenario names by a kind that an asking sentence refers back to ("that
    header") and that the corpus never calls so."""
    asking = interrogatives(question)
    kinds = {m.group(1).lower() for s in asking for m in _REFERS_BACK.finditer(s)}
    if not kinds:
        return []
    return [
        m.group(1)
        for s in _scenario_sentences(question, asking)
        for m in _SCENARIO_KIND.finditer(_scenario_free(s))
        if m.group(2).lower() in kinds and not corpus.names(m.group(1), m.group(2))
    ]


def analyse(question: str, corpus: Lexicon, frequency: Frequency) -> Asked:
    return Asked(
        classify(question),
        focus(question),
        unknown_subjects(question, corpus, frequency),
        options(question),
        numbers(question),
        units(question),
        counted(question),
    )


def unmentioned_focus(asked: Asked, said: Iterable[str]) -> tuple[str, ...]:
    """The focus words that neither appear among ``said`` (the content words of the kept claims
    and their cited titles) nor share a stem with one of them ("compared", "compare")."""
    return unsaid(asked.focus, said)


def mentions_focus(asked: Asked, said: Iterable[str]) -> bool:
    """Some focus word, or a word sharing its stem, is among ``said``; a question with no focus
    words left is not held to this."""
    return not asked.focus or len(unmentioned_focus(asked, said)) < len(asked.focus)
