"""Structure compliance and punctuation checks (pure: strings in, numbers out).

The article (§5.2) asked a model for five points and counted how often five arrived (99.2% on
the old version, 94.7% on the new one). Three functions answer that question for any prompt:

- :func:`requested_items` reads how many items a prompt asks for, in English ("in three points",
  "five steps", "list 5", "top 3", "give five tips", "a table with four rows", "a 5-step plan")
  and Chinese ("请分三点", "列出5个", "三个方面", "五种方法", "前3", "十大原则"). It returns
  ``None`` when the prompt asks for no count ("step by step", "in a table").
- :func:`count_items` counts the items an answer delivers: lines that start with a list marker
  (``1.`` ``1)`` ``(1)`` ``1、``, bullets ``-`` ``*`` ``•``, ``一、``, ``①``, ``第一`` /
  ``第一步``, ``Step 1:``), only at the shallowest indentation (sub-items do not count), and when
  numbered and bulleted lines share that level, only the ordered family (bullets under numbered
  points are details). Without list lines, the body rows of the first Markdown table (header and
  ``|---|`` separator excluded). With at most one item found that way, inline Chinese ordinals
  ("第一，…第二，…", "①…②…", "一是…二是…") counted as the longest run 1, 2, 3… in order. Lines inside fenced
  code blocks are ignored.
- :func:`compliant` is ``delivered == requested``; :func:`judged_compliance` leaves out answers
  that cannot comply: cut at ``max_tokens`` (``truncated``) or padded to it (``ignore_eos``).

The punctuation check (§5.5) is :func:`punctuation_counts`: in a Chinese answer, how many
punctuation marks are full-width (，。！？；：、（）“”…) and how many half-width (, . ! ? ; : ( ))
where a Chinese text would use full-width ones. A half-width mark counts only next to a Chinese
character (nearest non-space neighbour on either side), so decimals ("3.5"), list markers
("1. "), code and English words inside Chinese text are not flagged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "ItemCount",
    "PunctuationCounts",
    "asks_for_table",
    "compliant",
    "count_items",
    "delivered_items",
    "fullwidth_share",
    "is_chinese",
    "judged_compliance",
    "parse_number",
    "punctuation_counts",
    "requested_items",
]

# ---- numbers ----------------------------------------------------------------------------------
_EN_NUMBERS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty".split())}
_ZH_DIGITS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
MAX_ITEMS = 50   # a "count" above this is a year, a quantity or a version, not a list length


def parse_number(word: str) -> int | None:
    """``"5"``, ``"five"``, ``"五"``, ``"十二"``, ``"两"``, ``"二十"`` -> int; anything else -> None."""
    word = word.strip().lower()
    if word.isascii() and word.isdigit():
        return int(word)
    if word in _EN_NUMBERS:
        return _EN_NUMBERS[word]
    if not word or any(ch not in _ZH_DIGITS and ch != "十" for ch in word):
        return None
    if "十" not in word:
        return _ZH_DIGITS[word] if len(word) == 1 else None
    tens, _, ones = word.partition("十")
    if "十" in ones or len(tens) > 1 or len(ones) > 1:
        return None
    return (_ZH_DIGITS[tens] if tens else 1) * 10 + (_ZH_DIGITS[ones] if ones else 0)


# ---- what the prompt asks for -----------------------------------------------------------------
_EN_NUM = r"(\d{1,2}|" + "|".join(sorted(_EN_NUMBERS, key=len, reverse=True)) + r")"
_EN_NOUNS = (
    "points?|bullet points?|bullets?|key points?|steps?|tips?|ways?|reasons?|advantages?|"
    "disadvantages?|benefits?|drawbacks?|causes?|effects?|stages?|phases?|items?|examples?|rows?|"
    "ideas?|things?|features?|differences?|similarities|factors?|methods?|strategies|strategy|"
    "aspects?|questions?|facts?|principles?|rules?|types?|kinds?|lessons?|mistakes?|options?|pros|"
    "cons|takeaways?|recommendations?|suggestions?|practices?|techniques?|tools?|challenges?|"
    "risks?|problems?|issues?|solutions?|use cases?|components?|characteristics?|categories|"
    "category|areas?|parts?|habits?|signs?|uses?|applications?|principles?|pillars?|goals?|"
    "criteria|arguments?|trends?|approaches?|measures?|actions?|tasks?|concepts?"
)
# Words that end a count's phrase: "in 3 paragraphs the main causes" asks for no list of three.
_EN_STOP = (r"(?:the|a|an|and|or|of|in|on|at|to|for|with|by|from|about|than|sentences?|paragraphs?|"
            r"words?|lines?|characters?|minutes?|hours?|days?|weeks?|months?|years?|times?)\b")
# NUM, up to three adjective-like words, then a countable noun: "five practical ways", "3 key points".
_EN_NOUN_RE = re.compile(
    rf"(?<![\w/.\-^]){_EN_NUM}(?:[\s-]+(?!{_EN_NUM}\b|{_EN_STOP})[a-z][a-z'-]*){{0,3}}?"
    rf"[\s-]+(?:{_EN_NOUNS})\b", re.I)
# A verb right before the number: "list 5", "top 3", "give me three", "name two".
_EN_VERB_RE = re.compile(
    rf"\b(?:list|name|give(?:\s+me)?|top|provide|suggest|enumerate|outline|share|identify|recommend|"
    rf"write(?:\s+down)?)\s+(?:the\s+)?(?:top\s+)?(?:exactly\s+)?{_EN_NUM}\b(?![.\d])", re.I)
# "a 5-step plan", "a three-point summary".
_EN_HYPHEN_RE = re.compile(rf"(?<![\w/.\-]){_EN_NUM}-(?:step|point|item|part|stage|phase|row)\b", re.I)

_ZH_NUM = r"([一二两三四五六七八九十]{1,3}|\d{1,2})"
_ZH_NOUNS = (
    "方面|要点|建议|方法|原因|优势|优点|缺点|好处|坏处|步骤|技巧|特点|理由|阶段|例子|区别|因素|策略|"
    "措施|问题|原则|办法|途径|思路|注意事项|事项|维度|角度|特征|作用|场景|趋势|挑战|风险|习惯|观点|"
    "部分|环节|功能|步|点|条|项"
)
# 三点 / 5条 / 三步 / 五项 (not 第三点, not 下午三点 / 三点钟 / 三点半, not 一点 = "a little").
_ZH_CLASSIFIER_RE = re.compile(
    rf"(?<![第午晨\d一二两三四五六七八九十]){_ZH_NUM}\s*(?:点(?![钟半多\d])|条|步|项)")
# 三个方面 / 五种排序方法 / 十大设计原则 / 3类问题 (up to six characters before the noun).
_ZH_MEASURE_RE = re.compile(
    rf"(?<![第\d一二两三四五六七八九十]){_ZH_NUM}\s*(?:个|种|类|大)\s*[\u4e00-\u9fff]{{0,6}}?(?:{_ZH_NOUNS})")
# 列出5个… / 列举三种… / 给出3类… (a measure word, then anything), and 前3 / 前三名 (top 3).
_ZH_VERB_RE = re.compile(
    rf"(?:列出|列举|给出|举出|写出|说出|提供|总结|归纳|概括|推荐)\s*{_ZH_NUM}\s*(?:个|种|类)")
_ZH_TOP_RE = re.compile(r"前\s*(\d{1,2}(?!\d)|[二两三四五六七八九十]{1,3}(?=个|名|条|项|种|大))")
_TABLE_ASK_RE = re.compile(r"\btables?\b|\btabular\b|表格|列表对比|用表", re.I)


def requested_items(prompt: str) -> int | None:
    """How many items ``prompt`` asks for, or None (see module docstring). The earliest match wins."""
    best: tuple[int, int] | None = None   # (position, count)
    for regex in (_EN_NOUN_RE, _EN_VERB_RE, _EN_HYPHEN_RE, _ZH_CLASSIFIER_RE, _ZH_MEASURE_RE, _ZH_VERB_RE,
                  _ZH_TOP_RE):
        for match in regex.finditer(prompt):
            count = parse_number(match.group(1))
            if count is None or not 1 <= count <= MAX_ITEMS:
                continue
            if count == 1 and regex is _ZH_CLASSIFIER_RE:
                continue              # 一点 / 一条 mostly mean "a little" / "one of"
            if best is None or match.start() < best[0]:
                best = (match.start(), count)
            break
    return None if best is None else best[1]


def asks_for_table(prompt: str) -> bool:
    """True when the prompt asks for a table ("in a table", "表格"): count table rows first."""
    return _TABLE_ASK_RE.search(prompt) is not None


# ---- what the answer delivers -----------------------------------------------------------------
_ZH_ORDINALS = "一二三四五六七八九十"
_PREFIX = r"(?:#{1,6}\s+)?(?:\*\*|__)?"
_ITEM_FAMILIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("number", re.compile(rf"{_PREFIX}(?:\d{{1,2}}(?:[.)、．](?!\d)|\s*[:：](?!\d))|[(（]\d{{1,2}}[)）])")),
    ("zh_number", re.compile(rf"{_PREFIX}[{_ZH_ORDINALS}]{{1,3}}[、.．]")),
    ("circled", re.compile(rf"{_PREFIX}[①-⑳]")),
    ("ordinal", re.compile(rf"{_PREFIX}(?:第[{_ZH_ORDINALS}\d]{{1,3}}"
                           rf"(?:步|点|条|项|个|部分|阶段|方面)?(?=[\s，,、：:.。])"
                           rf"|step\s+\d{{1,2}}\b)", re.I)),
    ("bullet", re.compile(r"[-*•·+]\s+(?=\S)")),
)
_ORDERED = ("number", "zh_number", "circled", "ordinal")
_FENCE_RE = re.compile(r"^\s*(```|~~~)")
_TABLE_SEP_RE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")
_INLINE_MARKERS = (
    lambda n: f"第{_zh_numeral(n)}",
    lambda n: chr(0x2460 + n - 1) if n <= 20 else "\0",
    lambda n: f"{_zh_numeral(n)}是",
)


@dataclass(frozen=True)
class ItemCount:
    """Items an answer delivers and how they were found: list, table, inline or none."""

    n: int
    kind: str


def _zh_numeral(n: int) -> str:
    if n <= 10:
        return " 一二三四五六七八九十"[n]
    return (("" if n < 20 else _ZH_ORDINALS[n // 10 - 1]) + "十"
            + ("" if n % 10 == 0 else _ZH_ORDINALS[n % 10 - 1]))


def _prose_lines(text: str) -> list[str]:
    """Lines outside fenced code blocks."""
    lines, in_code = [], False
    for line in text.splitlines():
        if _FENCE_RE.match(line):
            in_code = not in_code
            continue
        if not in_code:
            lines.append(line)
    return lines


def _indent(line: str) -> int:
    stripped = line.lstrip(" \t\u3000")
    prefix = line[: len(line) - len(stripped)]
    return sum(4 if ch == "\t" else 1 for ch in prefix)


def _list_count(lines: list[str]) -> int:
    found: list[tuple[int, str]] = []          # (indent, family) of every list-item line
    for line in lines:
        body = line.lstrip(" \t\u3000")
        if _TABLE_SEP_RE.match(body) or body.startswith(("---", "***", "___")):
            continue
        for family, regex in _ITEM_FAMILIES:
            if regex.match(body):
                found.append((_indent(line), family))
                break
    if not found:
        return 0
    top = min(indent for indent, _ in found)
    at_top = [family for indent, family in found if indent <= top + 1]
    ordered = [f for f in _ORDERED if f in at_top]
    if ordered:
        return max(at_top.count(f) for f in ordered)
    return len(at_top)


def _table_count(lines: list[str]) -> int:
    for i, line in enumerate(lines):
        if i == 0 or not _TABLE_SEP_RE.match(line) or "|" not in lines[i - 1]:
            continue
        rows = 0
        for body in lines[i + 1:]:
            if "|" not in body or not body.strip():
                break
            rows += 1
        return rows
    return 0


def _inline_count(text: str) -> int:
    best = 0
    for marker in _INLINE_MARKERS:
        position, n = 0, 0
        while True:
            found = text.find(marker(n + 1), position)
            if found < 0:
                break
            n, position = n + 1, found + 1
        best = max(best, n if n >= 2 else 0)
    return best


def count_items(answer: str, *, prefer_table: bool = False) -> ItemCount:
    """Items delivered by ``answer`` (see module docstring); ``prefer_table`` counts table rows
    before list lines (for prompts that asked for a table)."""
    lines = _prose_lines(answer)
    counters = [("list", _list_count), ("table", _table_count)]
    if prefer_table:
        counters.reverse()
    found = ItemCount(0, "none")
    for kind, counter in counters:
        n = counter(lines)
        if n:
            found = ItemCount(n, kind)
            break
    if found.n <= 1:                  # "第一，…；第二，…" on one line starts like a one-item list
        n = _inline_count("\n".join(lines))
        if n > found.n:
            found = ItemCount(n, "inline")
    return found


def delivered_items(answer: str, *, prefer_table: bool = False) -> int:
    """Number of items ``answer`` delivers (``count_items(...).n``)."""
    return count_items(answer, prefer_table=prefer_table).n


def compliant(requested: int | None, delivered: int) -> bool | None:
    """``delivered == requested``; None when nothing was requested."""
    return None if requested is None else delivered == requested


def judged_compliance(requested: int | None, delivered: int, *, forced: bool = False,
                      truncated: bool = False) -> bool | None:
    """:func:`compliant`, or None when the answer cannot be judged: its length was forced to
    ``max_tokens`` (``ignore_eos``: a padded answer repeats its list) or the server cut it there
    (a ``truncated`` answer cannot deliver the items it had not reached). Callers count such
    answers apart (``quality`` ``truncated_n``, ``forced_length_n``)."""
    return None if forced or truncated else compliant(requested, delivered)


# ---- punctuation ------------------------------------------------------------------------------
_HAN_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
FULLWIDTH_PUNCT = frozenset("，。！？；：、（）“”‘’《》〈〉【】「」『』")
HALFWIDTH_PUNCT = frozenset(",.!?;:()")
_LIST_MARKER_RE = re.compile(r"^\s*(?:\d{1,2}[.)]|\(\d{1,2}\))")


@dataclass(frozen=True)
class PunctuationCounts:
    """Full-width marks and the half-width marks used where Chinese text wants full-width ones."""

    fullwidth: int
    halfwidth: int

    @property
    def share(self) -> float | None:
        total = self.fullwidth + self.halfwidth
        return None if total == 0 else self.fullwidth / total


def is_chinese(text: str) -> bool:
    """True when Chinese characters are at least a quarter of the non-space characters."""
    han = len(_HAN_RE.findall(text))
    return han >= 2 and han * 4 >= sum(1 for ch in text if not ch.isspace())


def _is_han(ch: str) -> bool:
    return bool(ch) and _HAN_RE.match(ch) is not None


def _neighbour(text: str, index: int, step: int) -> str:
    index += step
    while 0 <= index < len(text) and text[index] in " \t":
        index += step
    return text[index] if 0 <= index < len(text) else ""


def punctuation_counts(text: str) -> PunctuationCounts:
    """Count full-width marks, and half-width marks next to a Chinese character (module docstring)."""
    full = half = 0
    for line in text.splitlines():
        marker = _LIST_MARKER_RE.match(line)
        start = marker.end() if marker else 0
        for i in range(start, len(line)):
            ch = line[i]
            if ch in FULLWIDTH_PUNCT:
                full += 1
            elif ch in HALFWIDTH_PUNCT and (_is_han(_neighbour(line, i, -1))
                                            or _is_han(_neighbour(line, i, 1))):
                half += 1
    return PunctuationCounts(full, half)


def fullwidth_share(text: str) -> float | None:
    """Share of full-width punctuation in a Chinese ``text``; None for other text or no punctuation."""
    return punctuation_counts(text).share if is_chinese(text) else None
