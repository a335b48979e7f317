"""Generate the bundled RAG dataset: ``corpus.jsonl`` and ``questions.jsonl`` (fixed seed).

    python data/rag/generate.py          # rewrites both files next to this script

Everything is fictional and made from the templates below: companies, products, cities, people
and rivers are invented names, and every sentence is filled from these templates, so no text is
copied from anywhere. The same seed always gives the same bytes.

Corpus documents (``corpus.jsonl``: ``id``, ``title``, ``text``, ``kind``, ``entity``, optional
``claims`` and ``facts``). ``facts`` are the document's labelled facts, what the fact-error check
(``fourfold/fingerprint/facts.py``) holds answers against: ``{"subject", "attribute", "value",
"kind": "number"|"date"|"name", "cues"}`` (``FACT_ATTRIBUTES`` below), one per number, year or name
the text states about a company, product or city (a contradicting source labels the value it states):

- ``company_profile``: founding year and founder, head office, staff, chief executive, flagship
  product. About a third say "established" or "based in" instead of "founded" / "headquartered"
  (a question and its answer do not always share words).
- ``product_sheet``, ``city_guide``: the facts about one product or city.
- ``sector_overview``: several companies of one sector with their head-office cities.
- ``market_note``: short notes that repeat a name but hold no fact a question asks for (the
  distractors that make plain BM25 miss: a short document repeating a name outscores a long one
  that states the fact once).
- ``directory_entry`` / ``retail_listing``: a second source that *contradicts* a profile or a
  product sheet (another founding or launch year). Both documents carry ``claims``:
  ``{"<conflict group>": "<the value this document states>"}``; a retrieved set holding two
  documents of one group with different values is a conflict.

Questions (``questions.jsonl``: ``id``, ``prompt``, ``reference``, ``gold_ids``, ``kind``,
optional ``conflict_group``): ``gold_ids`` are every document that states the asked fact
correctly (a contradicting source is never gold). The file is also a prompt file for the
simulator (``--prompts``): it answers a question with its ``reference``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

SEED = 20240611
HERE = Path(__file__).resolve().parent

FIRST = ["Vel", "Quin", "Tar", "Bor", "Cal", "Dren", "Esk", "Fal", "Gor", "Hal", "Ith", "Jor", "Kel",
         "Lum", "Mor", "Nev", "Orv", "Pel", "Ros", "Sil", "Tov", "Ulm", "Var", "Wen", "Yar", "Zel",
         "Brak", "Cor", "Dal", "Fen", "Gil", "Hest", "Ivr", "Kor", "Lisk", "Mav", "Nor", "Ost", "Pry",
         "Rin", "Sav", "Tre", "Vos", "Wyl", "Aud", "Bel", "Cyr", "Dov"]
SECOND = ["ora", "trel", "ix", "mont", "ara", "ven", "oth", "ani", "eld", "ura", "esta", "ion", "ock",
          "ane", "ith", "ova"]
SECTORS = {
    "Systems": ("network equipment", "router"),
    "Foods": ("packaged foods", "snack bar"),
    "Robotics": ("warehouse robots", "picking arm"),
    "Textiles": ("technical fabrics", "rain jacket"),
    "Energy": ("home batteries", "battery pack"),
    "Optics": ("camera lenses", "zoom lens"),
    "Motors": ("electric scooters", "scooter"),
    "Audio": ("headphones", "headset"),
    "Pharma": ("generic medicines", "allergy tablet"),
    "Analytics": ("forecasting software", "dashboard suite"),
}
PERSON_FIRST = ["Mara", "Ilse", "Tomas", "Oren", "Priya", "Soren", "Ada", "Kiran", "Lotte", "Emil", "Nadia",
                "Rafe", "Yusra", "Bram", "Celia", "Dario", "Freya", "Gideon", "Hana", "Ivo", "Juno", "Levi",
                "Mirela", "Nico", "Odile", "Pavel", "Rhea", "Silas", "Tova", "Ugo"]
PERSON_LAST = ["Quell", "Varn", "Reeve", "Astley", "Brannock", "Castellan", "Dunmore", "Elphick", "Farrow",
               "Greaves", "Holloway", "Ingram", "Jessop", "Kettering", "Lindqvist", "Marchetti", "Norland",
               "Oakes", "Pemberton", "Quarry", "Rooke", "Sallow", "Thorne", "Underhill", "Vickery",
               "Whitlock", "Yardley", "Zorin"]
CITY_A = ["Tarn", "Holm", "Cast", "Dun", "Ash", "Bram", "Colde", "Elm", "Fern", "Glen", "Hart", "Kest",
          "Lark", "Marl", "Nether", "Orme", "Pike", "Quarr", "Rook", "Stav", "Thorn", "Umber", "Wald",
          "Yew", "Brin", "Crane", "Dray", "Eyre", "Fold", "Gant"]
CITY_B = ["wick", "bridge", "rel", "mere", "fold", "haven", "stead", "port", "ley", "ford"]
COUNTRIES = ["Valdoria", "Ostreva", "Kelmark", "Suria", "Pellan"]
RIVERS = ["Lune", "Serra", "Ottow", "Brisk", "Cale", "Doven", "Ember", "Fyle", "Garrow", "Hesk", "Idle",
          "Jarra", "Kell", "Loddon", "Mirr", "Nene", "Orrin", "Pell", "Quave", "Rill"]
LANDMARKS = ["clock tower", "glass market hall", "old salt bridge", "hilltop observatory", "stone lighthouse",
             "river gardens", "copper-domed library", "harbour crane", "weavers' hall", "botanic glasshouse"]
FESTIVALS = ["lantern", "kite", "jazz", "harvest", "film", "bread", "boat", "choir"]
PRODUCT_WORDS = ["Arvo", "Brisa", "Corvin", "Delta", "Eno", "Fable", "Gyre", "Halo", "Isla", "Jolt", "Kiva",
                 "Lumo", "Mistral", "Nimbus", "Onyx", "Pico", "Quasar", "Riva", "Sable", "Tern", "Umbra",
                 "Vesta", "Wisp", "Xeno", "Yule", "Zephyr", "Alder", "Beacon", "Cinder", "Drift", "Ember",
                 "Flint", "Grove", "Haze", "Iris", "Juniper", "Kestrel", "Lyric", "Maple", "Nova", "Opal",
                 "Prism", "Quill", "Rowan", "Slate", "Talon", "Umber", "Vireo", "Willow", "Yarrow", "Zinnia",
                 "Aster", "Bramble", "Cobalt", "Dune", "Echo", "Fjord", "Garnet", "Heron", "Indigo"]
NOTE_TEMPLATES = [
    "Shares of {n} moved little this week. Analysts who follow {n} expect steady orders. {n} declined to "
    "comment on the figures.",
    "{n} appeared at a trade fair this month. Visitors to the {n} stand asked about prices, and staff from "
    "{n} handed out leaflets.",
    "A supplier dispute involving {n} was settled out of court. Lawyers for {n} said the matter was closed. "
    "{n} will keep the supplier.",
    "{n} sponsored a local football club this season. The club thanked {n} in a short statement, and {n} "
    "logos now appear on the shirts.",
    "Customers of {n} reported slow deliveries in the spring. {n} apologised and said extra drivers had "
    "been hired. A spokesperson for {n} gave no date.",
]
CITY_NOTES = [
    "{c} saw heavy rain this weekend. Visitors to {c} should pack umbrellas, and roads out of {c} may close.",
    "Hotel prices in {c} rose during the holiday week. Tourism officers in {c} expect more guests, and {c} "
    "council welcomed the news.",
]
PRODUCT_NOTES = [
    "Readers keep asking about the {p}. Our review roundup of the {p} collects opinions; owners of the {p} "
    "mostly praise the finish.",
]


# attribute -> (kind, cues): the words that state the attribute in a sentence (see fingerprint/facts.py)
FACT_ATTRIBUTES = {
    "founded": ("date", ["founded", "established", "founding"]),
    "founder": ("name", ["founded by", "founder", "established by"]),
    "headquarters": ("name", ["headquartered", "headquarters", "head office", "based in"]),
    "country": ("name", ["headquartered", "head office", "based in", "country", "city in"]),
    "staff": ("number", ["employs", "employees", "staff", "people", "workers"]),
    "chief executive": ("name", ["chief executive", "CEO", "led by", "run by"]),
    "second site": ("date", ["second site"]),
    "maker": ("name", ["made by", "maker", "makes", "manufactured", "produced"]),
    "launched": ("date", ["launched", "launch", "released", "introduced"]),
    "price": ("number", ["sells", "price", "costs", "crowns"]),
    "weight": ("number", ["weighs", "weight", "grams"]),
    "population": ("number", ["residents", "population", "inhabitants", "people"]),
    "river": ("name", ["river"]),
    "mayor": ("name", ["mayor"]),
}


def fact(subject: str, attribute: str, value: object) -> dict:
    """One labelled fact of a document: ``{"subject", "attribute", "value", "kind", "cues"}``."""
    kind, cues = FACT_ATTRIBUTES[attribute]
    return {"subject": subject, "attribute": attribute, "value": str(value), "kind": kind, "cues": cues}


def person(rng: random.Random, used: set[str]) -> str:
    while True:
        name = f"{rng.choice(PERSON_FIRST)} {rng.choice(PERSON_LAST)}"
        if name not in used:
            used.add(name)
            return name


def build(seed: int = SEED) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    people: set[str] = set()

    # ---- cities ----
    city_names: list[str] = []
    while len(city_names) < 30:
        name = rng.choice(CITY_A) + rng.choice(CITY_B)
        if name not in city_names and name[:4] not in {c[:4] for c in city_names}:
            city_names.append(name)
    cities: list[dict[str, Any]] = []
    for i, name in enumerate(city_names):
        cities.append({"name": name, "country": COUNTRIES[i % len(COUNTRIES)],
                       "river": RIVERS[i % len(RIVERS)], "population": rng.randrange(40, 900) * 1000,
                       "mayor": person(rng, people),
                       "landmark": rng.choice(LANDMARKS), "festival": rng.choice(FESTIVALS)})

    # ---- companies and products ----
    stems: list[str] = []
    while len(stems) < 60:
        name = rng.choice(FIRST) + rng.choice(SECOND)
        if name not in stems:
            stems.append(name)
    sectors = list(SECTORS)
    products_words = list(PRODUCT_WORDS)
    rng.shuffle(products_words)
    companies: list[dict[str, Any]] = []
    for i, stem_name in enumerate(stems):
        sector = sectors[i % len(sectors)]
        what, product_kind = SECTORS[sector]
        city = cities[rng.randrange(len(cities))]
        product = f"{products_words[i]} {rng.randrange(2, 9)}"
        companies.append({
            "name": f"{stem_name} {sector}", "sector": sector, "what": what, "city": city,
            "founded": rng.randrange(1968, 2019), "founder": person(rng, people), "ceo": person(rng, people),
            "staff": rng.randrange(3, 400) * 25, "product": product, "product_kind": product_kind,
            "launched": 0, "price": rng.randrange(19, 900), "weight": rng.randrange(80, 4000),
            "wording": rng.random(),            # < 0.3: "established" / "based in" wording
            "notes": rng.choice([0, 1, 1, 2, 2, 3, 3, 4]),
        })
    for c in companies:
        c["launched"] = rng.randrange(max(c["founded"] + 1, 1990), 2024)

    docs: list[dict] = []

    def add(kind: str, entity: str, title: str, text: str, claims: dict | None = None,
            facts: list[dict] | None = None) -> str:
        doc_id = f"doc-{len(docs) + 1:04d}"
        doc: dict[str, Any] = {"id": doc_id, "title": title, "text": text, "kind": kind, "entity": entity}
        if claims:
            doc["claims"] = claims
        if facts:
            doc["facts"] = facts
        docs.append(doc)
        return doc_id

    # conflict groups: 6 founding years, 2 launch years
    founding_conflicts = set(rng.sample(range(60), 6))
    launch_conflicts = set(rng.sample(sorted(set(range(60)) - founding_conflicts), 2))

    for i, c in enumerate(companies):
        n, city = c["name"], c["city"]
        alt = c["wording"] < 0.3
        founded = (f"{n} was established in {c['founded']} by {c['founder']}." if alt
                   else f"{n} was founded in {c['founded']} by {c['founder']}.")
        office = (f"Its head office is based in {city['name']}, {city['country']}." if alt
                  else f"The company is headquartered in {city['name']}, {city['country']}.")
        sentences = [
            f"{n} makes {c['what']}.",
            founded,
            office,
            f"It employs about {c['staff']} people.",
            f"The current chief executive is {c['ceo']}.",
            f"Its best-known product is the {c['product']} {c['product_kind']}.",
            f"In {min(c['founded'] + rng.randrange(3, 12), 2023)} the firm opened a second site near the "
            f"{city['river']} river.",
        ]
        claims = {f"cg-founded-{i:02d}": str(c["founded"])} if i in founding_conflicts else None
        site_year = sentences[-1].split()[1].rstrip(",")
        facts = [fact(n, "founded", c["founded"]), fact(n, "founder", c["founder"]),
                 fact(n, "headquarters", city["name"]), fact(n, "country", city["country"]),
                 fact(n, "staff", c["staff"]), fact(n, "chief executive", c["ceo"]),
                 fact(n, "second site", site_year)]
        c["profile_id"] = add("company_profile", n, f"{n} company profile", " ".join(sentences), claims,
                              facts)

    for i, c in enumerate(companies):
        p = f"{c['product']} {c['product_kind']}"
        text = (f"The {p} is a product made by {c['name']}. It was launched in {c['launched']}. "
                f"It sells for {c['price']} crowns and weighs {c['weight']} grams.")
        claims = {f"cg-launched-{i:02d}": str(c["launched"])} if i in launch_conflicts else None
        facts = [fact(p, "maker", c["name"]), fact(p, "launched", c["launched"]),
                 fact(p, "price", c["price"]), fact(p, "weight", c["weight"])]
        c["sheet_id"] = add("product_sheet", p, f"{p} product sheet", text, claims, facts)

    for city in cities:
        nm = city["name"]
        text = (f"{nm} is a city in {city['country']} with about {city['population']} residents. "
                f"The {city['river']} river runs through {nm}. The mayor of {nm} is {city['mayor']}. "
                f"Its best-known landmark is the {city['landmark']}. {nm} holds a {city['festival']} "
                f"festival every summer.")
        facts = [fact(nm, "country", city["country"]), fact(nm, "population", city["population"]),
                 fact(nm, "river", city["river"]), fact(nm, "mayor", city["mayor"])]
        city["guide_id"] = add("city_guide", nm, f"{nm} city guide", text, None, facts)

    by_sector: dict[str, list[dict]] = {}
    for c in companies:
        by_sector.setdefault(c["sector"], []).append(c)
    for sector, members in by_sector.items():
        what = SECTORS[sector][0]
        lines = [f"The {what} sector has {len(members)} notable firms."]
        for c in members:
            lines.append(f"{c['name']} is headquartered in {c['city']['name']}.")
        overview = add("sector_overview", sector, f"{what.capitalize()} sector overview", " ".join(lines),
                       None, [fact(c["name"], "headquarters", c["city"]["name"]) for c in members])
        for c in members:
            c["overview_id"] = overview

    for c in companies:
        for k in range(c["notes"]):
            template = NOTE_TEMPLATES[(k + len(docs)) % len(NOTE_TEMPLATES)]
            add("market_note", c["name"], f"{c['name']} market note {k + 1}", template.format(n=c["name"]))
    for city in cities[::3]:
        for k, template in enumerate(CITY_NOTES):
            add("market_note", city["name"], f"{city['name']} news {k + 1}", template.format(c=city["name"]))
    for c in companies[::6]:
        p = f"{c['product']} {c['product_kind']}"
        add("market_note", p, f"{p} review roundup", PRODUCT_NOTES[0].format(p=p))

    for i in sorted(founding_conflicts):
        c = companies[i]
        wrong = c["founded"] + rng.choice([-3, -2, 2, 3])
        text = (f"A regional trade directory lists {c['name']} as founded in {wrong}. "
                f"The entry gives {c['city']['name']} as the home town of the firm.")
        c["conflict_id"] = add("directory_entry", c["name"], f"{c['name']} directory entry", text,
                               {f"cg-founded-{i:02d}": str(wrong)}, [fact(c["name"], "founded", wrong)])
    for i in sorted(launch_conflicts):
        c = companies[i]
        p = f"{c['product']} {c['product_kind']}"
        wrong = c["launched"] + 1
        text = (f"A retail listing says the {p} was launched in {wrong} and ships from a warehouse in "
                f"{c['city']['name']}.")
        c["conflict_id"] = add("retail_listing", p, f"{p} retail listing", text,
                               {f"cg-launched-{i:02d}": str(wrong)}, [fact(p, "launched", wrong)])

    # ---- questions ----
    questions: list[dict] = []

    def ask(kind: str, prompt: str, reference: str, gold: list[str], group: str = "") -> None:
        q = {"id": f"q-{len(questions) + 1:03d}", "prompt": prompt, "reference": reference,
             "gold_ids": gold, "kind": kind}
        if group:
            q["conflict_group"] = group
        questions.append(q)

    order = list(range(60))
    rng.shuffle(order)
    founded_set = sorted(founding_conflicts) + [i for i in order if i not in founding_conflicts][:9]
    for i in founded_set:
        c = companies[i]
        group = f"cg-founded-{i:02d}" if i in founding_conflicts else ""
        ask("founded", f"In which year was {c['name']} founded?",
            f"{c['name']} was founded in {c['founded']}.", [c["profile_id"]], group)
    rest = [i for i in order if i not in founded_set]
    for i in rest[:12]:
        c = companies[i]
        ask("headquarters", f"Where is {c['name']} headquartered?",
            f"{c['name']} is headquartered in {c['city']['name']}, {c['city']['country']}.",
            [c["profile_id"], c["overview_id"]])
    for i in rest[12:20]:
        c = companies[i]
        ask("founder", f"Who founded {c['name']}?", f"{c['name']} was founded by {c['founder']}.",
            [c["profile_id"]])
    maker_set = rest[20:30]
    for i in maker_set:
        c = companies[i]
        p = f"{c['product']} {c['product_kind']}"
        ask("maker", f"Which company makes the {p}?", f"The {p} is made by {c['name']}.",
            [c["sheet_id"], c["profile_id"]])
    launch_set = sorted(launch_conflicts) + [i for i in order
                                             if i not in launch_conflicts and i not in maker_set][:5]
    for i in launch_set:
        c = companies[i]
        p = f"{c['product']} {c['product_kind']}"
        group = f"cg-launched-{i:02d}" if i in launch_conflicts else ""
        ask("launched", f"When was the {p} launched?", f"The {p} was launched in {c['launched']}.",
            [c["sheet_id"]], group)
    for city in cities[:4]:
        ask("river", f"Which river runs through {city['name']}?",
            f"The {city['river']} river runs through {city['name']}.", [city["guide_id"]])
    for city in cities[4:8]:
        ask("mayor", f"Who is the mayor of {city['name']}?",
            f"The mayor of {city['name']} is {city['mayor']}.", [city["guide_id"]])
    return docs, questions


def write_jsonl(path: Path, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")


def main() -> None:
    docs, questions = build()
    write_jsonl(HERE / "corpus.jsonl", docs)
    write_jsonl(HERE / "questions.jsonl", questions)
    print(f"wrote {len(docs)} documents and {len(questions)} questions to {HERE}")


if __name__ == "__main__":
    main()
