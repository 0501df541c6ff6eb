"""Write-time entity extraction: a deterministic heuristic, no model.

An entity is a name a memory mentions, so that memories naming the same thing can be joined
(the graph channel, :mod:`memory_core.channels.graph`). Four kinds of mention are found, in this
order (a later kind never takes characters an earlier one took):

1. ``@handles``: ``@alice``, ``@data-team`` (not the middle of an e-mail address);
2. namespaced terms: ``project:alpha``, ``name:typescript`` (a lower-case namespace, a colon and
   no space; URL schemes such as ``https:`` are not namespaces, nor are times like ``10:30``);
3. inner-capitalised technical names: ``TypeScript``, ``PostgreSQL``, ``iOS``, ``GPT-4``, and
   acronyms of two or more capitals (``AWS``, ``API``);
4. capitalised spans: runs of capitalised words (``Alice``, ``Acme Corp``, ``New York``,
   ``Bank of America``), possessive ``'s`` dropped. Function words (``The``, ``When``, ...),
   month and weekday names and note labels (``Note:``, ``Reminder:``) are never entities. A
   single capitalised word that opens a sentence is ambiguous (``Invoices are sent``) and counts
   only when the same text also capitalises it mid-sentence, when it is possessive
   (``Alice's``), when it labels a speaker (``Caroline: ...``) or when a verb that names what a
   person or organisation does follows it (``Alice works``, ``Bob said``).

Entities keep their first surface form, in text order of first mention, at most ``max_entities``;
two mentions are the same entity when their :func:`memory_core.store.entity_key` (case-folded)
agree.

Example:
    >>> extract_entities("Alice moved from Acme Corp to Globex; ping @bob about project:alpha.")
    ('Alice', 'Acme Corp', 'Globex', '@bob', 'project:alpha')
"""

from __future__ import annotations

import re

from memory_core.store import entity_key

MAX_ENTITIES = 32

_HANDLE = re.compile(r"(?<![\w@.+-])@[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?")
_NAMESPACED = re.compile(r"(?<![\w/:.@-])(?P<ns>[a-z][a-z0-9_-]*):(?P<rest>[A-Za-z0-9][\w.+-]*"
                         r"[A-Za-z0-9+]|[A-Za-z0-9])(?!:?//)")
_SCHEMES = frozenset({"http", "https", "ftp", "ftps", "mailto", "file", "data", "ssh", "git",
                      "tel", "urn", "ws", "wss", "s3", "gs"})
_TECH = re.compile(r"\b(?:[A-Z][A-Za-z]*-[0-9][A-Za-z0-9]*(?:\.[0-9]+)*"
                   r"|[A-Za-z]*[a-z][A-Z][A-Za-z0-9]*|[A-Z]{2,}[a-z]*[0-9]*s?)\b")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'’&.-]*[A-Za-z0-9]|[A-Za-z]")
_SENTENCE_END = re.compile(r"[.!?;:]\s*$|\n\s*$")

_FUNCTION_WORDS = frozenset("""
a an the this that these those i im i'm ive i've id i'd ill i'll me my mine we us our ours you
your yours he him his she her hers they them their theirs it its one who whom whose what when
where why how which whichever whatever yes no not ok okay hi hello hey dear thanks thank please
sorry also then so but and or nor if in on at for to from with by as of about after before
during since until while because although though however therefore meanwhile moreover anyway
there here now today tomorrow yesterday tonight just maybe perhaps well oh ah wow all any some
every each both either neither many much more most few several other another such same do does
did done is are was were be been being have has had will would shall should can could may might
must let lets let's let’s great good nice sure really very actually basically first second
third next last finally note notes reminder reminders update updates todo fyi summary re fw fwd
""".split())
_CALENDAR = frozenset("""
january february march april may june july august september october november december jan feb
mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday
mon tue tues wed thu thur thurs fri sat sun
""".split())
_CONNECTORS = frozenset({"of", "de", "la", "van", "von", "der", "del", "da", "&", "and"})
# verbs that say what a person or organisation did: they make an opening word a name
_AGENT_VERBS = frozenset("""
said says told tells asked asks answered replied wrote writes works worked lives lived moved
moves joined joins left leaves likes liked loves loved prefers preferred wants wanted went goes
thinks thought mentioned mentions met meets bought buys visited visits started starts owns
owned leads led runs ran uses used plays played feels felt decided decides announced
announces launched launches acquired acquires hired hires migrated migrates built builds
founded manages managed shipped ships adopted adopts reported reports """.split())
_ADVERBS = frozenset("now also still just recently finally then never always already later "
                     "often once soon first".split())
_TECH_STOP = frozenset({"OK", "AM", "PM", "US", "UK", "EU", "TV", "ID", "IDs", "OKs"})


def _sentence_initial(text: str, start: int) -> bool:
    head = text[:start]
    return not head.strip() or bool(_SENTENCE_END.search(head)) or head.rstrip().endswith(
        ('"', "“", "(", "-", "—", "*", "•"))


def _clean(word: str) -> str:
    for suffix in ("'s", "’s"):
        if word.endswith(suffix):
            return word[:-len(suffix)]
    return word.rstrip(".'’-")


def _capitalised(word: str) -> bool:
    return word[:1].isupper() and entity_key(_clean(word)) not in _FUNCTION_WORDS | _CALENDAR


def _spans(text: str, taken: list[tuple[int, int]]) -> list[tuple[int, int, bool]]:
    """Capitalised spans ``(start, end, opens_sentence)`` outside the taken ranges."""
    words = [m for m in _WORD.finditer(text)
             if not any(m.start() < e and s < m.end() for s, e in taken)]
    out: list[tuple[int, int, bool]] = []
    i = 0
    while i < len(words):
        w = words[i]
        if not _capitalised(w.group(0)):
            i += 1
            continue
        j = i
        while j + 1 < len(words):
            gap = text[words[j].end():words[j + 1].start()]
            nxt = words[j + 1].group(0)
            if gap == " " and _capitalised(nxt) and not words[j].group(0).endswith(("'s", "’s")):
                j += 1
            elif (gap == " " and nxt in _CONNECTORS and j + 2 < len(words)
                  and text[words[j + 1].end():words[j + 2].start()] == " "
                  and _capitalised(words[j + 2].group(0))):
                j += 2
            else:
                break
        out.append((w.start(), words[j].end(), _sentence_initial(text, w.start())))
        i = j + 1
    return out


def extract_entities(text: str, max_entities: int = MAX_ENTITIES) -> tuple[str, ...]:
    """The entities a text names (surface forms, first mention first; see the module rules)."""
    found: list[tuple[int, str]] = []
    taken: list[tuple[int, int]] = []

    def add(start: int, end: int, surface: str) -> None:
        taken.append((start, end))
        found.append((start, surface))

    for m in _HANDLE.finditer(text):
        add(m.start(), m.end(), m.group(0))
    for m in _NAMESPACED.finditer(text):
        if m.group("ns") in _SCHEMES or any(m.start() < e and s < m.end() for s, e in taken):
            continue
        add(m.start(), m.end(), m.group(0))
    for m in _TECH.finditer(text):
        word = m.group(0)
        if word in _TECH_STOP or any(m.start() < e and s < m.end() for s, e in taken):
            continue
        if word.isupper() and len(word) > 6:
            continue  # shouting, not an acronym
        add(m.start(), m.end(), word)

    spans = _spans(text, taken)
    mid_sentence = {entity_key(_clean(text[s:e])) for s, e, initial in spans if not initial}
    for start, end, initial in spans:
        surface = _clean(text[start:end])
        if not surface:
            continue
        single = " " not in surface
        if initial and single:
            after = text[end:end + 40]
            following = [w.lower() for w in re.findall(r"[A-Za-z]+", after)[:2]]
            if following and following[0] in _ADVERBS:
                following = following[1:]  # "Alice now works", "Bob also said"
            possessive = text[end - 2:end] in ("'s", "’s")
            label = after.startswith(":")
            agent = bool(following) and following[0] in _AGENT_VERBS and bool(
                re.match(r"\s+[A-Za-z]", after))
            if not (entity_key(surface) in mid_sentence or possessive or label or agent):
                continue
        add(start, end, surface)

    out: dict[str, str] = {}
    for _, surface in sorted(found):
        out.setdefault(entity_key(surface), surface)
    return tuple(out.values())[:max_entities]
