"""What the simulator answers: reference answers from the prompt dataset, or a generic text.

The dataset is the bundled ``data/prompts/prompts.jsonl`` (read here directly, without
``measure``): the last user message, stripped, is matched exactly against each item's prompt.
Unknown prompts get a generic answer chosen deterministically from the prompt text; when the
prompt asks for N items, the generic answer is a numbered list of N items.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from fourfold.data import bundled
from fourfold.targets.sim.tokens import is_chinese

DEFAULT_PROMPTS_PATH = bundled("prompts", "prompts.jsonl")

_NUMBER_WORDS = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10,
}
_REQUESTED_RES = (
    re.compile(r"\bin (two|three|four|five|six|seven|eight|nine|ten|\d+) "
               r"(?:points|steps|bullets|parts|items|ways)\b", re.I),
    re.compile(r"\b(?:list|give|name|outline|describe|suggest) "
               r"(two|three|four|five|six|seven|eight|nine|ten|\d+)\b", re.I),
    re.compile(r"\b(two|three|four|five|six|seven|eight|nine|ten|\d+) "
               r"(?:tips|reasons|advantages|benefits|ways|steps|points|examples|differences|rows|items|"
               r"causes|stages)\b", re.I),
    re.compile(r"(?:分|列出|列举|给出|说出)\s*([\d二两三四五六七八九十])\s*[个条项点步]"),
)

EN_GENERIC = (
    "This answer comes from the fourfold simulator, which stands in for a real language model during load "
    "tests.",
    "The text is chosen deterministically from the prompt, so the same question always receives the same "
    "reply.",
    "Its length and pacing follow the active profile, which sets the first-token latency and the gap "
    "between tokens.",
    "A real model would tailor the content to the question; here the words only need to be plausible and "
    "stable.",
    "Quality checks compare answers with reference texts, so prompts from the bundled dataset get their own "
    "references.",
    "Streaming clients should see one small chunk per token, followed by the terminal event of the chosen "
    "API.",
    "Usage numbers count the prompt and completion tokens with a simple word-level tokenizer.",
    "Pauses, load and the structure of the reply are part of the plan the simulator publishes in a response "
    "header.",
)
ZH_GENERIC = (
    "这是fourfold模拟器生成的回答，它在压测中代替真实的大语言模型。",
    "回答内容由提示词确定性地选出，同一个问题总是得到同一个回答。",
    "回答的长度和节奏由当前配置决定，包括首个token的延迟和token之间的间隔。",
    "真实模型会针对问题组织内容，而这里的文字只需要通顺并且稳定。",
    "质量检查会把回答与参考答案比较，因此数据集中的问题都有各自的参考答案。",
    "流式客户端应当逐个token收到小数据块，最后收到所用接口的结束事件。",
    "用量统计使用简单的分词规则计算输入和输出的token数量。",
    "停顿、负载和回答结构都写在模拟器通过响应头公开的计划里。",
)


@dataclass(frozen=True)
class Answer:
    """The text the simulator will (before perturbation) answer, and what it knows about it."""

    text: str
    item_id: str = ""            # "" for a generic answer
    requested_items: int | None = None


def requested_items(prompt: str) -> int | None:
    """How many items the prompt asks for ("in three points", "列出5个"), or None."""
    for rx in _REQUESTED_RES:
        m = rx.search(prompt)
        if m:
            word = m.group(1).lower()
            n = int(word) if word.isdigit() else _NUMBER_WORDS.get(word)
            if n and 1 <= n <= 50:
                return n
    return None


def generic_answer(prompt: str) -> Answer:
    """A deterministic answer for a prompt the dataset does not know."""
    key = zlib.crc32(prompt.encode("utf-8"))
    chinese = is_chinese(prompt)
    pool = ZH_GENERIC if chinese else EN_GENERIC
    order = [pool[(key + 3 * i) % len(pool)] for i in range(len(pool))]
    n_items = requested_items(prompt)
    sep = "" if chinese else " "
    if n_items:
        intro = f"以下是{n_items}点说明：" if chinese else f"Here are {n_items} points."
        lines = [intro]
        for k in range(n_items):
            lines.append(f"{k + 1}. {order[k % len(order)]}")
        return Answer("\n".join(lines), "", n_items)
    n_sentences = 4 + key % 3
    return Answer(sep.join(order[:n_sentences]), "", None)


class AnswerBook:
    """Prompt text -> reference answer, loaded from one or more JSONL files."""

    def __init__(self, entries: dict[str, Answer] | None = None) -> None:
        self._entries = dict(entries or {})

    def __len__(self) -> int:
        return len(self._entries)

    @classmethod
    def load(cls, paths: list[Path] | tuple[Path, ...] = (DEFAULT_PROMPTS_PATH,)) -> AnswerBook:
        entries: dict[str, Answer] = {}
        for path in paths:
            entries.update(read_answers(Path(path)))
        return cls(entries)

    def answer(self, prompt: str) -> Answer:
        """The reference answer for ``prompt`` (exact match after strip) or a generic one."""
        key = prompt.strip()
        found = self._entries.get(key)
        return found if found is not None else generic_answer(key)


def read_answers(path: Path) -> dict[str, Answer]:
    """Read prompt -> Answer from a JSONL file of items (``prompt`` or ``messages`` + ``reference``)."""
    entries: dict[str, Answer] = {}
    if not path.is_file():
        return entries
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                data = json.loads(line)
            except ValueError:
                continue
            prompt = _item_prompt(data)
            reference = data.get("reference") or (data.get("references") or [None])[0]
            if not prompt or not isinstance(reference, str):
                continue
            n = data.get("requested_items")
            n = int(n) if isinstance(n, int) else requested_items(prompt)
            entries[prompt.strip()] = Answer(reference, str(data.get("id", "")), n)
    return entries


def _item_prompt(data: dict) -> str:
    if isinstance(data.get("prompt"), str):
        return data["prompt"]
    for message in reversed(data.get("messages") or []):
        if (isinstance(message, dict) and message.get("role") == "user"
                and isinstance(message.get("content"), str)):
            return message["content"]
    return ""
