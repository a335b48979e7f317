"""Generate the bundled dataset samples from the conversations below (one source, three formats).

    python fourfold/data/datasets/generate.py      # rewrites the three files next to this script

- ``sharegpt_sample.json``: ShareGPT (a JSON array of ``{"id", "conversations": [{"from", "value"}]}``),
  every conversation whole: some multi-turn, some opening with a system turn;
- ``sharegpt_sample.parquet``: the same items as Parquet columns ``id``, ``system``, ``prompt``,
  ``reference`` (written with fastparquet);
- ``openai_sample.jsonl``: the same items as OpenAI chat JSONL (``{"id", "messages"}``: the system
  message, the first question and its answer as the last assistant message).

Every text was written for fourfold (nothing is copied from the real ShareGPT or any other
dataset); the files are Apache-2.0 like the rest of the project. The same source always gives the
same bytes. fourfold reads all three into the same items (id, prompt messages, reference):
tests/unit/test_dataset_formats.py checks it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# (id, system message or "", [(question, answer), ...]); the first pair is the item, the rest the
# conversation's later turns (L4-style multi-turn history kept in the item's meta["turns"])
CONVERSATIONS: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("sg-001", "", [("What is the difference between a process and a thread?",
                     "A process has its own memory space; threads run inside a process and share its memory. "
                     "Switching between threads is cheaper, but shared memory needs locks.")]),
    ("sg-002", "You are a concise assistant.", [("How do I reverse a list in Python?",
                                                "Use my_list.reverse() to reverse it in place, or "
                                                "my_list[::-1] to get a reversed copy.")]),
    ("sg-003", "", [("Why is the sky blue?",
                     "Air molecules scatter short blue wavelengths of sunlight much more than red ones, so "
                     "blue light reaches your eyes from every direction of the sky."),
                    ("Then why are sunsets red?",
                     "At sunset the light crosses far more air, so most of the blue is scattered away before "
                     "it reaches you and the remaining light looks orange and red.")]),
    ("sg-004", "", [("Give me three tips for a good night's sleep.",
                     "1. Go to bed and get up at the same time every day.\n2. Keep the bedroom dark, quiet "
                     "and cool.\n3. Avoid screens and caffeine in the hours before bed.")]),
    ("sg-005", "", [("What does HTTP status 429 mean?",
                     "429 Too Many Requests: the client sent too many requests in a given time. The server "
                     "may add a Retry-After header saying how long to wait.")]),
    ("sg-006", "You answer like a patient teacher.", [
        ("What is a prime number?",
         "A prime number is a whole number greater than 1 whose only divisors are 1 and itself, such as 2, "
         "3, 5 and 7."),
        ("Is 1 a prime number?",
         "No. By definition a prime has exactly two different divisors, and 1 has only one."),
        ("What about 91?",
         "91 is not prime: it equals 7 times 13.")]),
    ("sg-007", "", [("Write a haiku about autumn rain.",
                     "Cold rain on red leaves,\nthe gutter hums a low tune,\nthe year turns inward.")]),
    ("sg-008", "", [("How can I make my bread crust crispier?",
                     "Bake at a high temperature with steam for the first ten minutes, for example by "
                     "putting a tray of hot water in the oven, then remove the water and let the crust "
                     "dry and brown.")]),
    ("sg-009", "", [("Explain what a hash map is in one paragraph.",
                     "A hash map stores key-value pairs in an array of buckets. A hash function turns each "
                     "key into a bucket index, so looking up, inserting or deleting a key takes constant "
                     "time on average; collisions are handled by chaining or by probing for another free "
                     "slot.")]),
    ("sg-010", "", [("What is the capital of Australia?",
                     "Canberra is the capital of Australia, not Sydney or Melbourne.")]),
    ("sg-011", "You are a helpful travel assistant.", [
        ("I have two days in Lisbon. What should I see?",
         "Day one: the Alfama district, the castle and a tram ride up to a viewpoint. Day two: Belem with "
         "its tower and monastery, and pastries near the monastery."),
        ("Is it easy to get around without a car?",
         "Yes. Trams, buses, the metro and trains to Belem and Sintra cover everything; the hills are steep, "
         "so wear comfortable shoes.")]),
    ("sg-012", "", [("How many minutes are there in a week?",
                     "There are 10,080 minutes in a week: 7 days times 24 hours times 60 minutes.")]),
    ("sg-013", "", [("What is the difference between TCP and UDP?",
                     "TCP gives an ordered, reliable byte stream with connection setup and congestion "
                     "control. UDP sends independent datagrams with no delivery guarantee, which is lighter "
                     "and suits real-time traffic.")]),
    ("sg-014", "", [("Suggest a name for a grey kitten.",
                     "How about Pebble, Smoke, Ash or Misty?"),
                    ("Something less common?",
                     "Try Graphite, Nimbus or Flint.")]),
    ("sg-015", "Reply in plain English for a beginner.", [
        ("What is an API?",
         "An API is a set of rules that lets one program ask another for data or actions, like a menu a "
         "restaurant gives you: you order from it without knowing how the kitchen works.")]),
    ("sg-016", "", [("Convert 100 degrees Fahrenheit to Celsius.",
                     "100 F is about 37.8 C: subtract 32 and multiply by 5/9.")]),
    ("sg-017", "", [("Why do we use version control?",
                     "Version control records every change to the code, so you can see who changed what and "
                     "why, go back to an earlier state, and let several people work on the same files in "
                     "parallel branches.")]),
    ("sg-018", "", [("What should I pack for a day hike?",
                     "Water, snacks, a map or offline app, a rain layer, sun protection, a small first-aid "
                     "kit and a charged phone.")]),
    ("sg-019", "", [("Explain recursion to a ten-year-old.",
                     "Recursion is solving a problem by solving a smaller copy of the same problem, like "
                     "opening a set of nesting dolls until you reach the smallest one."),
                    ("Can you give an example in code?",
                     "def countdown(n):\n    if n == 0:\n        return\n    print(n)\n    countdown(n - 1)"),
                    ("What stops it from running forever?",
                     "The base case: when n reaches 0 the function returns without calling itself again.")]),
    ("sg-020", "", [("What is the boiling point of water at the top of a high mountain?",
                     "Lower than 100 C, because the air pressure is lower; at about 3,000 metres water boils "
                     "near 90 C.")]),
    ("sg-021", "You are a careful code reviewer.", [
        ("Is it safe to build SQL queries with string formatting?",
         "No. Formatting user input into SQL allows injection. Use parameterised queries so the driver sends "
         "the values separately from the statement.")]),
    ("sg-022", "", [("Summarise the water cycle in two sentences.",
                     "The sun evaporates water from seas and land, and the vapour cools into clouds. The "
                     "water falls back as rain or snow and flows through rivers and the ground to the "
                     "sea again.")]),
    ("sg-023", "", [("What is a good way to learn a new language?",
                     "Practise a little every day, listen to native speakers, speak from the start even with "
                     "mistakes, and learn the most frequent words first.")]),
    ("sg-024", "", [("How do I center a div with CSS?",
                     "Make the parent a flex container with display: flex; justify-content: center; "
                     "align-items: center; and the child is centred both ways.")]),
    ("sg-025", "", [("Tell me a fun fact about octopuses.",
                     "An octopus has three hearts and blue blood, and most of its neurons are in its arms."),
                    ("Why is their blood blue?",
                     "It carries oxygen with hemocyanin, a copper-based protein, instead of iron-based "
                     "hemoglobin.")]),
    ("sg-026", "", [("What does the acronym LLM stand for?",
                     "LLM stands for large language model: a neural network trained on a lot of text to "
                     "predict and generate language.")]),
    ("sg-027", "You are a friendly fitness coach.", [
        ("I can only exercise 20 minutes a day. What should I do?",
         "Alternate days: brisk walking or cycling on one, and a short strength circuit of squats, push-ups, "
         "lunges and planks on the next. Consistency matters more than length.")]),
    ("sg-028", "", [("Is a tomato a fruit or a vegetable?",
                     "Botanically it is a fruit, because it grows from the flower and holds seeds; in "
                     "cooking it is treated as a vegetable.")]),
    ("sg-029", "", [("How does a refrigerator keep food cold?",
                     "A refrigerant absorbs heat as it evaporates inside the fridge, then a compressor "
                     "pushes it to the coils at the back, where it condenses and releases that heat into "
                     "the room.")]),
    ("sg-030", "", [("Write a one-line Python function that squares a number.",
                     "square = lambda x: x * x")]),
    ("sg-031", "", [("What is the median of 3, 9, 4, 1 and 7?",
                     "Sorted, the numbers are 1, 3, 4, 7, 9, so the median is 4.")]),
    ("sg-032", "", [("Why do leaves change colour in autumn?",
                     "As days shorten, trees stop making green chlorophyll, revealing yellow and orange "
                     "pigments that were there all along; some trees also make red pigments.")]),
    ("sg-033", "Answer in at most two sentences.", [
        ("What is latency?",
         "Latency is the time between a request and its response. For a language model service it is often "
         "split into time to first token and time per output token.")]),
    ("sg-034", "", [("Plan a simple vegetarian dinner for four.",
                     "A chickpea and spinach curry with rice, a cucumber yogurt side, and sliced oranges "
                     "with cinnamon for dessert.")]),
    ("sg-035", "", [("用一句话解释什么是机器学习。",
                     "机器学习是让计算机从数据中自动学习规律，而不是由人逐条编写规则的方法。")]),
    ("sg-036", "", [("北京有哪些值得去的地方？",
                     "可以去故宫、天坛、颐和园和长城，晚上可以逛逛胡同。"),
                    ("去长城最好选哪一段？",
                     "第一次去可以选慕田峪，人比八达岭少，风景也很好。")]),
    ("sg-037", "你是一位耐心的数学老师。", [
        ("什么是勾股定理？",
         "在直角三角形中，两条直角边的平方和等于斜边的平方，即 a² + b² = c²。")]),
    ("sg-038", "", [("如何泡一杯好喝的绿茶？",
                     "用约八十度的水，不要用沸水，茶叶放三克左右，泡两到三分钟即可。")]),
    ("sg-039", "", [("给我三个提高写作能力的建议。",
                     "1. 每天坚持写一点。\n2. 多读优秀的文章并模仿。\n3. 写完后认真修改。")]),
    ("sg-040", "", [("What is the difference between weather and climate?",
                     "Weather is the state of the atmosphere over hours or days; climate is the average of "
                     "the weather over decades in a region."),
                    ("So one cold winter does not disprove warming?",
                     "Right. A single season is weather; warming is a long-term trend in the averages.")]),
]


def sharegpt_records() -> list[dict[str, Any]]:
    """ShareGPT records: every conversation whole, a system turn first where there is one."""
    records = []
    for item_id, system, pairs in CONVERSATIONS:
        turns = [{"from": "system", "value": system}] if system else []
        for question, answer in pairs:
            turns += [{"from": "human", "value": question}, {"from": "gpt", "value": answer}]
        records.append({"id": item_id, "conversations": turns})
    return records


def openai_records() -> list[dict[str, Any]]:
    """OpenAI chat records: the system message, the first question, its answer as the last message."""
    records = []
    for item_id, system, pairs in CONVERSATIONS:
        question, answer = pairs[0]
        messages = [{"role": "system", "content": system}] if system else []
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
        records.append({"id": item_id, "messages": messages})
    return records


def table_rows() -> dict[str, list[str]]:
    """Columns id, system, prompt, reference (the first exchange of each conversation)."""
    columns: dict[str, list[str]] = {"id": [], "system": [], "prompt": [], "reference": []}
    for item_id, system, pairs in CONVERSATIONS:
        for name, value in zip(columns, (item_id, system, *pairs[0]), strict=True):
            columns[name].append(value)
    return columns


def write_parquet(path: Path, columns: dict[str, list[str]]) -> None:
    import fastparquet
    import pandas as pd

    fastparquet.write(str(path), pd.DataFrame(columns), write_index=False, compression="GZIP", stats=False)


def main(out: Path = HERE) -> None:
    (out / "sharegpt_sample.json").write_text(
        json.dumps(sharegpt_records(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    (out / "openai_sample.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in openai_records()), encoding="utf-8")
    write_parquet(out / "sharegpt_sample.parquet", table_rows())


if __name__ == "__main__":
    main()
