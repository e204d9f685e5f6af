"""Generate connector/cli/sample-contacts.csv, the demo's input (package data): about 1,000 realistic,
seeded contacts.

Run once (`python config/make_sample.py`); the output is committed so the demo and its test read
the same file. Besides clean rows it holds the cases a real export has: the same email again in
another case, rows with neither email nor phone, and malformed emails.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

SEED = 20261122
ROWS = 1000
SAME_EMAIL_OTHER_CASE = 30
NO_EMAIL_NO_PHONE = 25
BAD_EMAILS = 25
PHONE_ONLY = 60

FIRST = [
    "James",
    "Mary",
    "Robert",
    "Patricia",
    "John",
    "Jennifer",
    "Michael",
    "Linda",
    "David",
    "Elizabeth",
    "William",
    "Barbara",
    "Richard",
    "Susan",
    "Joseph",
    "Jessica",
    "Thomas",
    "Sarah",
    "Charles",
    "Karen",
    "Christopher",
    "Lisa",
    "Daniel",
    "Nancy",
    "Matthew",
    "Betty",
    "Anthony",
    "Sandra",
    "Mark",
    "Margaret",
    "Donald",
    "Ashley",
    "Steven",
    "Kimberly",
    "Andrew",
    "Emily",
    "Paul",
    "Donna",
    "Joshua",
    "Michelle",
    "Kenneth",
    "Carol",
    "Kevin",
    "Amanda",
    "Brian",
    "Melissa",
    "George",
    "Deborah",
    "Timothy",
    "Stephanie",
    "Sofia",
    "Mateo",
    "Aisha",
    "Omar",
    "Priya",
    "Arjun",
    "Mei",
    "Wei",
    "Yuki",
    "Hiroshi",
    "Lucia",
    "Diego",
    "Fatima",
    "Noah",
    "Chloe",
    "Liam",
    "Zoe",
    "Ines",
    "Tomasz",
]
LAST = [
    "Smith",
    "Johnson",
    "Williams",
    "Brown",
    "Jones",
    "Garcia",
    "Miller",
    "Davis",
    "Rodriguez",
    "Martinez",
    "Hernandez",
    "Lopez",
    "Gonzalez",
    "Wilson",
    "Anderson",
    "Thomas",
    "Taylor",
    "Moore",
    "Jackson",
    "Martin",
    "Lee",
    "Perez",
    "Thompson",
    "White",
    "Harris",
    "Sanchez",
    "Clark",
    "Ramirez",
    "Lewis",
    "Robinson",
    "Walker",
    "Young",
    "Allen",
    "King",
    "Wright",
    "Scott",
    "Torres",
    "Nguyen",
    "Hill",
    "Flores",
    "Green",
    "Adams",
    "Nelson",
    "Baker",
    "Hall",
    "Rivera",
    "Campbell",
    "Mitchell",
    "Carter",
    "Roberts",
    "Patel",
    "Kowalski",
    "Okafor",
    "Tanaka",
    "Schmidt",
    "Rossi",
    "Dubois",
    "Jansen",
    "Novak",
]
COMPANIES = (
    "Acme Logistics",
    "Northwind Traders",
    "Blue Harbor Dental",
    "Greenfield Farms",
    "Summit Legal",
    "Brightside Solar",
    "Riverbend Clinic",
    "Keystone Builders",
    "Orchid Analytics",
    "Pioneer Freight",
    "Maple Street Bakery",
    "Copperline Media",
    "Harborview Hotels",
    "Ironwood Fitness",
    "Lumen Labs",
)
TITLES = (
    "Office Manager",
    "Owner",
    "CFO",
    "Operations Lead",
    "Marketing Director",
    "Sales Manager",
    "Founder",
    "IT Administrator",
    "Practice Manager",
    "Purchasing Agent",
    "",
    "",
)
MAIL_DOMAINS = ("gmail.com", "outlook.com", "yahoo.com", "icloud.com", "proton.me", "fastmail.com")
PLANS = ("free", "starter", "pro", "enterprise")
AREA_CODES = ("212", "312", "415", "512", "617", "206", "303", "404", "702", "919")


def company_domain(company: str) -> str:
    return company.lower().replace(" ", "") + ".com"


def phone(rng: random.Random) -> str:
    area, exchange, line = rng.choice(AREA_CODES), rng.randint(201, 989), rng.randint(1000, 9999)
    return rng.choice((f"({area}) {exchange}-{line}", f"{area}-{exchange}-{line}", f"+1 {area} {exchange} {line}"))


def bad_email(rng: random.Random, first: str, last: str) -> str:
    local = f"{first}.{last}".lower()
    return rng.choice(
        (
            f"{local}@{rng.choice(MAIL_DOMAINS).replace('.', ',')}",  # a comma for the dot
            f"{local}.{rng.choice(MAIL_DOMAINS)}",  # no @
            f"{local}@@{rng.choice(MAIL_DOMAINS)}",  # two @
            f"{first.lower()} {last.lower()}@{rng.choice(MAIL_DOMAINS)}",  # a space
            f"@{rng.choice(MAIL_DOMAINS)}",  # nothing before the @
        )
    )


def generate(rng: random.Random) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    used: set[str] = set()
    for n in range(1, ROWS + 1):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        company = rng.choice(COMPANIES) if rng.random() < 0.7 else ""
        domain = company_domain(company) if company and rng.random() < 0.6 else rng.choice(MAIL_DOMAINS)
        local = rng.choice((f"{first}.{last}", f"{first[0]}{last}", f"{first}{rng.randint(1, 99)}")).lower()
        email = f"{local}@{domain}"
        while email in used:
            email = f"{local}{rng.randint(100, 999)}@{domain}"
        used.add(email)
        rows.append(
            {
                "id": f"C{n:05d}",
                "First": first,
                "Last": last if rng.random() < 0.95 else "",
                "Email": email,
                "Phone": phone(rng) if rng.random() < 0.6 else "",
                "Company": company,
                "Title": rng.choice(TITLES) if company else "",
                "Plan": rng.choice(PLANS),
                "Signed Up": f"2026-{rng.randint(1, 10):02d}-{rng.randint(1, 28):02d}",
            }
        )
    special = rng.sample(range(100, ROWS), SAME_EMAIL_OTHER_CASE + NO_EMAIL_NO_PHONE + BAD_EMAILS + PHONE_ONLY)
    marks = iter(special)
    for _ in range(SAME_EMAIL_OTHER_CASE):  # a later signup by the same person, email typed in another case
        row = rows[next(marks)]
        earlier = rows[rng.randrange(0, 100)]
        row["First"], row["Last"] = earlier["First"], earlier["Last"]
        row["Email"] = rng.choice((earlier["Email"].upper(), earlier["Email"].title(), earlier["Email"].capitalize()))
    for _ in range(NO_EMAIL_NO_PHONE):
        row = rows[next(marks)]
        row["Email"] = row["Phone"] = ""
    for _ in range(BAD_EMAILS):
        row = rows[next(marks)]
        row["Email"] = bad_email(rng, row["First"], row["Last"] or "x")
    for _ in range(PHONE_ONLY):
        row = rows[next(marks)]
        row["Email"], row["Phone"] = "", phone(rng)
    return rows


def main() -> None:
    out = Path(__file__).resolve().parents[1] / "connector" / "cli" / "sample-contacts.csv"
    rows = generate(random.Random(SEED))
    with out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} contacts to {out}")


if __name__ == "__main__":
    main()
