"""Structure compliance and punctuation (pure, table-driven, English and Chinese)."""

from __future__ import annotations

import pytest

from fourfold.data import DATA_DIR
from fourfold.fingerprint.structure import (
    asks_for_table,
    compliant,
    count_items,
    delivered_items,
    fullwidth_share,
    is_chinese,
    parse_number,
    punctuation_counts,
    requested_items,
)
from fourfold.workloads.items import load_items

REQUESTED = [
    # English
    ("Explain quantum annealing in three points.", 3),
    ("Briefly explain quantum annealing.", None),
    ("List three advantages of HTTP/3.", 3),
    ("Give five tips for writing clean code.", 5),
    ("Describe the process in five steps.", 5),
    ("list 5 things to pack for a hike", 5),
    ("What are the top 3 mistakes beginners make?", 3),
    ("Give me the top 10", 10),
    ("Name two rivers in Europe.", 2),
    ("Name five practical ways to reduce cloud costs.", 5),
    ("Explain the 4 key differences between TCP and UDP", 4),
    ("Compare Python and Go in a table with four rows.", 4),
    ("Write a 5-step plan to learn Rust", 5),
    ("Summarize the causes of the French Revolution in three points.", 3),
    ("Provide 12 examples of verbs", 12),
    ("Compare CNN and RNN in a table.", None),
    ("Solve x^2 - 5x + 6 = 0 step by step.", None),
    ("What is HTTP/3?", None),
    ("Explain in 3 paragraphs the main causes", None),
    ("In two sentences, explain recursion.", None),
    ("Write 200 words about tea.", None),
    ("What happened in 1789?", None),
    # Chinese
    ("请分三点简述量子退火原理。", 3),
    ("请分三点说明HTTP/3的优势。", 3),
    ("列出5个提高睡眠质量的方法。", 5),
    ("请分五点说明如何写好技术文档。", 5),
    ("从三个方面分析远程办公。", 3),
    ("给出3条建议", 3),
    ("介绍五种排序方法", 5),
    ("总结十大设计原则", 10),
    ("请分十二点说明", 12),
    ("两点建议就够了", 2),
    ("分三步完成部署", 3),
    ("前3名是谁？", 3),
    ("列举两个例子", 2),
    ("简述量子退火原理。", None),
    ("请用表格对比CNN和RNN。", None),
    ("请按步骤解方程x^2-5x+6=0。", None),
    ("说得简单一点", None),
    ("第三点是什么意思？", None),
    ("我们下午三点开会", None),
    ("请总结一下RAG", None),
]


@pytest.mark.parametrize(("prompt", "expected"), REQUESTED)
def test_requested_items(prompt: str, expected: int | None) -> None:
    assert requested_items(prompt) == expected


@pytest.mark.parametrize(("word", "value"), [
    ("5", 5), ("five", 5), ("Twelve", 12), ("五", 5), ("两", 2), ("十", 10), ("十二", 12), ("二十", 20),
    ("二十三", 23), ("十十", None), ("several", None), ("", None),
])
def test_parse_number(word: str, value: int | None) -> None:
    assert parse_number(word) == value


DELIVERED = [
    ("1. a\n2. b\n3. c", 3, "list"),
    ("1) a\n2) b", 2, "list"),
    ("(1) a\n(2) b\n(3) c\n(4) d", 4, "list"),
    ("Intro:\n- a\n- b\n- c\n- d\n- e\nOutro.", 5, "list"),
    ("* a\n* b", 2, "list"),
    ("• a\n• b\n• c", 3, "list"),
    ("1. **Bold** first\n2. second", 2, "list"),
    ("**1.** first\n**2.** second\n**3.** third", 3, "list"),
    ("### 1. Heading one\ntext\n### 2. Heading two\ntext", 2, "list"),
    ("Step 1: open\nStep 2: close", 2, "list"),
    # sub-items are details, not items
    ("1. a\n   - a1\n   - a2\n2. b\n   - b1\n3. c", 3, "list"),
    # bullets under numbered points at the same indentation: the ordered family counts
    ("1. Pros\n- fast\n- cheap\n2. Cons\n- fragile", 2, "list"),
    # decimals and prose starting with a number are not list items
    ("3.14 is pi.\n2024 was a year.", 0, "none"),
    # a horizontal rule is not a bullet
    ("a\n---\n- x\n- y", 2, "list"),
    # code blocks are ignored
    ("```\n- not\n- items\n1. no\n```\n- real", 1, "list"),
    # Markdown tables: header and separator excluded
    ("| A | B |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n| 5 | 6 |\n\nDone.", 3, "table"),
    ("A | B\n--- | ---\n1 | 2\n3 | 4", 2, "table"),
    ("| A | B |\n|:---|---:|\n| 1 | 2 |", 1, "table"),
    # Chinese
    ("一、甲\n二、乙\n三、丙", 3, "list"),
    ("①甲\n②乙\n③丙\n④丁\n⑤戊", 5, "list"),
    ("第一，甲。\n第二，乙。", 2, "list"),
    ("第一步，确定系数。\n第二步，分解。\n第三步，求解。", 3, "list"),
    ("1、甲\n2、乙\n3、丙", 3, "list"),
    ("以下是方法：\n1. 甲\n2. 乙\n3. 丙\n4. 丁", 4, "list"),
    ("| 方面 | CNN | RNN |\n|---|---|---|\n| 输入 | 图像 | 序列 |\n| 运算 | 卷积 | 循环 |", 2, "table"),
    # inline Chinese enumerations, when there are no list lines
    ("第一，要明确读者；第二，先给结论；第三，持续维护。", 3, "inline"),
    ("主要有①建连更快②无队头阻塞③连接迁移。", 3, "inline"),
    ("一是省时，二是灵活。", 2, "inline"),
    ("没有列表的段落。", 0, "none"),
    ("", 0, "none"),
]


@pytest.mark.parametrize(("answer", "n", "kind"), DELIVERED)
def test_count_items(answer: str, n: int, kind: str) -> None:
    counted = count_items(answer)
    assert (counted.n, counted.kind) == (n, kind)
    assert delivered_items(answer) == n


def test_prefer_table_counts_rows_before_a_trailing_list() -> None:
    answer = "| A | B |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n| 5 | 6 |\n| 7 | 8 |\n\nNotes:\n- one\n- two"
    assert count_items(answer).n == 2
    assert count_items(answer, prefer_table=True).n == 4
    assert asks_for_table("Compare Python and Go in a table with four rows.")
    assert asks_for_table("请用表格对比CNN和RNN。")
    assert not asks_for_table("Give five tips.")


@pytest.mark.parametrize(("requested", "delivered", "expected"), [(5, 5, True), (5, 4, False), (3, 6, False),
                                                                  (None, 4, None)])
def test_compliant(requested: int | None, delivered: int, expected: bool | None) -> None:
    assert compliant(requested, delivered) is expected


PUNCTUATION = [
    ("量子退火是一种优化方法，它利用量子隧穿。", 2, 0),
    ("量子退火是一种优化方法,它利用量子隧穿.", 0, 2),
    ("量子退火是一种优化方法, 它利用量子隧穿!", 0, 2),
    ("HTTP/3基于QUIC协议，版本号是1.3。", 2, 0),          # the decimal point is not counted
    ("1. 保持规律作息。\n2. 让卧室保持黑暗。", 2, 0),       # list markers are not counted
    ("x=(5±1)/2，所以解是2和3。", 2, 0),                   # math parentheses next to ASCII
    ("他说（大概）是对的：“可以”。", 6, 0),
    ("他说(大概)是对的:可以", 0, 3),
]


@pytest.mark.parametrize(("text", "full", "half"), PUNCTUATION)
def test_punctuation_counts(text: str, full: int, half: int) -> None:
    counts = punctuation_counts(text)
    assert (counts.fullwidth, counts.halfwidth) == (full, half)


def test_fullwidth_share() -> None:
    assert fullwidth_share("量子退火是一种优化方法，它利用量子隧穿.") == 0.5
    assert fullwidth_share("An English answer, with commas.") is None
    assert fullwidth_share("没有标点的中文") is None
    assert is_chinese("量子退火的原理可以分为三点")
    assert not is_chinese("Quantum annealing 量子")


def test_bundled_prompts_agree_with_their_references() -> None:
    """Every bundled item: the parsed request equals its requested_items field, and its reference
    delivers exactly that many items (the simulator's reference profile must be 100% compliant)."""
    items = load_items(DATA_DIR / "prompts" / "prompts.jsonl")
    assert len(items) >= 40
    for item in items:
        expected = item.meta.get("requested_items")
        assert requested_items(item.prompt) == expected, item.id
        if expected is not None:
            assert delivered_items(item.references[0],
                                   prefer_table=asks_for_table(item.prompt)) == expected, item.id
        if "zh" in item.meta.get("tags", []):
            assert fullwidth_share(item.references[0]) == 1.0, item.id
