"""The discovery evaluation set: generated agents with varied skills, and natural-language
questions with the agents that answer them.

Each capability is written three ways (three agents of different makers describe the same
ability in their own words) and asked for once, in plain words that mostly share none with the
skill's name, description or tags (``word_overlap`` counts them). Filler agents with unrelated
skills make the haystack larger. Everything is deterministic: the same cards every run.

Used by tests/registry/test_discovery.py (the recall margin, ``POST /a2a/select``) and by
bench/discovery_bench.py.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

# (key, question, tags, [(skill name, description), x3], example)
CAPABILITIES: list[tuple[str, str, list[str], list[tuple[str, str]], str]] = [
    (
        "weather",
        "will I need an umbrella in Lyon tomorrow",
        ["weather", "forecast"],
        [
            ("Weather forecast", "Forecasts temperature, rain and wind for any city."),
            ("Meteo outlook", "Predicts precipitation and conditions for the coming days."),
            ("Climate now", "Current conditions and a five day forecast by location."),
        ],
        "Forecast for Paris this weekend",
    ),
    (
        "translate",
        "turn this paragraph from German into Spanish",
        ["translation", "language"],
        [
            ("Translator", "Translates text between more than fifty languages."),
            ("Polyglot", "Renders documents in another language, keeping the tone."),
            ("Lingua converter", "Machine translation of sentences and web pages."),
        ],
        "Translate 'good morning' to Italian",
    ),
    (
        "invoice",
        "I need to bill a customer for last month's consulting hours",
        ["invoicing", "accounting"],
        [
            ("Invoice generator", "Creates invoices with line items, VAT and due dates."),
            ("Billing desk", "Issues invoices and payment requests to clients."),
            ("Receivables", "Prepares and sends invoices, tracks unpaid ones."),
        ],
        "Invoice ACME for 12 days of work",
    ),
    (
        "flights",
        "get me a plane ticket from Boston to Denver on Friday",
        ["travel", "flights"],
        [
            ("Flight booking", "Searches airlines and books flights."),
            ("Air fares", "Compares airfares and reserves seats on flights."),
            ("Trip planner air", "Finds and books the cheapest flight itinerary."),
        ],
        "Book a flight to Rome in May",
    ),
    (
        "hotel",
        "somewhere to sleep in Kyoto for three nights",
        ["travel", "lodging"],
        [
            ("Hotel reservations", "Books hotel rooms and compares rates."),
            ("Stay finder", "Finds accommodation: hotels, hostels and apartments."),
            ("Lodging booker", "Reserves rooms and suites at hotels worldwide."),
        ],
        "A hotel near the station in Milan",
    ),
    (
        "sql",
        "how many customers bought something twice, from our postgres tables",
        ["database", "sql"],
        [
            ("SQL assistant", "Writes and runs SQL queries against relational databases."),
            ("Query builder", "Turns questions into database queries and returns rows."),
            ("Data warehouse analyst", "Answers analytics questions with SQL on the warehouse."),
        ],
        "SELECT the top ten products by revenue",
    ),
    (
        "code-review",
        "look over my pull request and point out bugs",
        ["code", "review"],
        [
            ("Code review", "Reviews diffs for defects, style and security issues."),
            ("Diff critic", "Comments on changes in a merge request line by line."),
            ("Static reviewer", "Inspects source changes and flags likely errors."),
        ],
        "Review this patch to the parser",
    ),
    (
        "summarize",
        "give me the gist of this long report in a few lines",
        ["summarization", "text"],
        [
            ("Summarizer", "Condenses long documents into short summaries."),
            ("TLDR", "Writes brief abstracts of articles and papers."),
            ("Digest writer", "Produces bullet point digests of lengthy text."),
        ],
        "Summarize this article in three bullets",
    ),
    (
        "image-gen",
        "draw a picture of a cat riding a bicycle",
        ["image", "generation"],
        [
            ("Image generator", "Creates images from text prompts."),
            ("Illustrator", "Paints artwork and illustrations from a description."),
            ("Render studio", "Generates pictures, logos and concept art."),
        ],
        "An illustration of a lighthouse at dawn",
    ),
    (
        "transcribe",
        "write down what is said in this voice memo",
        ["speech", "audio"],
        [
            ("Speech to text", "Transcribes audio recordings into text."),
            ("Transcriber", "Converts spoken words in meetings into written transcripts."),
            ("Dictation", "Recognizes speech and returns the text."),
        ],
        "Transcribe this podcast episode",
    ),
    (
        "tts",
        "read this paragraph aloud with a natural voice",
        ["speech", "audio"],
        [
            ("Text to speech", "Synthesizes natural sounding speech from text."),
            ("Narrator", "Produces spoken audio narration for written content."),
            ("Voice synth", "Turns text into an MP3 spoken by a chosen voice."),
        ],
        "Narrate this chapter in a calm voice",
    ),
    (
        "stocks",
        "what is Apple trading at right now",
        ["finance", "markets"],
        [
            ("Stock quotes", "Real time share prices and market data."),
            ("Market ticker", "Latest equity prices, volumes and charts."),
            ("Equities feed", "Quotes for stocks and exchange traded funds."),
        ],
        "Price of TSLA",
    ),
    (
        "fx",
        "how many yen do I get for 200 euros",
        ["finance", "currency"],
        [
            ("Currency converter", "Converts amounts between currencies at current rates."),
            ("Exchange rates", "Foreign exchange rates for over 150 currencies."),
            ("Forex", "Conversion between money units using live rates."),
        ],
        "Convert 100 USD to GBP",
    ),
    (
        "calendar",
        "set up a meeting with Dana next Tuesday afternoon",
        ["calendar", "scheduling"],
        [
            ("Scheduler", "Finds free slots and schedules meetings on calendars."),
            ("Calendar assistant", "Creates events and sends invitations."),
            ("Appointment setter", "Books appointments in shared calendars."),
        ],
        "Schedule a call with the team on Monday",
    ),
    (
        "email",
        "send a note to the client that the delivery slipped",
        ["email", "messaging"],
        [
            ("Email sender", "Composes and sends email messages."),
            ("Mail composer", "Drafts and delivers emails over SMTP."),
            ("Outbox", "Writes messages and mails them to recipients."),
        ],
        "Email the board the quarterly numbers",
    ),
    (
        "recipes",
        "what can I cook tonight with eggs, spinach and feta",
        ["food", "cooking"],
        [
            ("Recipe finder", "Suggests recipes from the ingredients you have."),
            ("Chef", "Proposes dishes and step by step cooking instructions."),
            ("Meal ideas", "Recommends meals and recipes for a pantry."),
        ],
        "A vegetarian lasagna recipe",
    ),
    (
        "nutrition",
        "how much protein and fat is in a bowl of oatmeal",
        ["health", "food"],
        [
            ("Nutrition facts", "Calories and macronutrients of foods."),
            ("Diet tracker", "Counts calories and logs meals against goals."),
            ("Macro calculator", "Computes carbohydrates, proteins and lipids per serving."),
        ],
        "Calories in a banana",
    ),
    (
        "legal",
        "is this rental agreement clause enforceable",
        ["legal", "contracts"],
        [
            ("Contract analyzer", "Reviews contracts and flags risky terms."),
            ("Legal assistant", "Explains legal documents and obligations."),
            ("Lawyer bot", "Answers questions about law and agreements."),
        ],
        "Check this NDA for unusual terms",
    ),
    (
        "tax",
        "can I deduct my home office when I file this year",
        ["tax", "finance"],
        [
            ("Tax helper", "Prepares tax returns and finds deductions."),
            ("Tax advisor", "Answers income tax questions and filing rules."),
            ("Return preparer", "Fills in tax forms and estimates refunds."),
        ],
        "Estimate my income tax for 2025",
    ),
    (
        "shipping",
        "where is my parcel, the number is 1Z999",
        ["logistics", "tracking"],
        [
            ("Package tracking", "Tracks shipments across carriers."),
            ("Delivery status", "Reports where a package is and when it arrives."),
            ("Courier tracker", "Follows consignments with UPS, FedEx and DHL."),
        ],
        "Track my DHL shipment",
    ),
    (
        "sentiment",
        "are these product reviews mostly happy or angry",
        ["nlp", "sentiment"],
        [
            ("Sentiment analysis", "Classifies text as positive, negative or neutral."),
            ("Opinion miner", "Measures the mood of customer feedback."),
            ("Tone detector", "Scores the emotional polarity of messages."),
        ],
        "Sentiment of these tweets",
    ),
    (
        "ocr",
        "pull the text out of this scanned receipt photo",
        ["vision", "documents"],
        [
            ("OCR", "Extracts text from images and scanned documents."),
            ("Document reader", "Recognizes characters in PDFs and pictures."),
            ("Scan to text", "Optical character recognition for forms."),
        ],
        "Read the text in this screenshot",
    ),
    (
        "resume",
        "polish my CV before I apply for a job",
        ["careers", "writing"],
        [
            ("Resume writer", "Improves resumes and tailors them to job offers."),
            ("Career coach", "Rewrites curriculum vitae and cover letters."),
            ("CV builder", "Formats and strengthens job application documents."),
        ],
        "Improve my resume for a data role",
    ),
    (
        "jobs",
        "find openings for nurses near Leeds",
        ["careers", "recruiting"],
        [
            ("Job search", "Finds job postings matching skills and location."),
            ("Vacancy finder", "Lists open positions from many job boards."),
            ("Recruiter", "Matches candidates with employer openings."),
        ],
        "Remote Python developer positions",
    ),
    (
        "math",
        "what is the integral of x squared times sine x",
        ["math", "calculus"],
        [
            ("Math solver", "Solves equations, derivatives and integrals step by step."),
            ("Calculator pro", "Symbolic algebra and calculus computations."),
            ("Equation engine", "Computes exact and numeric solutions to formulas."),
        ],
        "Solve 3x + 5 = 20",
    ),
    (
        "music",
        "play something upbeat for my morning run",
        ["music", "entertainment"],
        [
            ("Music player", "Streams songs and playlists by mood or genre."),
            ("Playlist DJ", "Builds playlists of tracks for an activity."),
            ("Radio", "Plays audio tracks from a large catalogue."),
        ],
        "A jazz playlist for dinner",
    ),
    (
        "movies",
        "a good film to watch with kids this evening",
        ["entertainment", "movies"],
        [
            ("Movie recommender", "Recommends films based on taste."),
            ("Cinema guide", "Suggests what to stream and reviews of titles."),
            ("Watchlist", "Picks movies and series for a viewer."),
        ],
        "Something like Inception",
    ),
    (
        "news",
        "what happened in the world today",
        ["news", "media"],
        [
            ("News briefing", "Latest headlines from major outlets."),
            ("Headlines", "Top stories and breaking news by topic."),
            ("Press digest", "Current events summarized each morning."),
        ],
        "Top stories in technology",
    ),
    (
        "maps",
        "how do I drive from the airport to the old town",
        ["maps", "navigation"],
        [
            ("Directions", "Turn by turn routes for car, bike and walking."),
            ("Navigator", "Plans routes and estimates travel time."),
            ("Route planner", "Finds the fastest path between two addresses."),
        ],
        "Walking route to the museum",
    ),
    (
        "restaurants",
        "a table for four tonight at an Italian place",
        ["food", "booking"],
        [
            ("Restaurant booking", "Reserves tables at restaurants."),
            ("Dining finder", "Finds places to eat and makes reservations."),
            ("Table reserver", "Books seats at bistros and cafes."),
        ],
        "Book sushi for two at 8pm",
    ),
    (
        "fitness",
        "plan my workouts to get stronger over eight weeks",
        ["health", "fitness"],
        [
            ("Workout planner", "Creates exercise programs and training plans."),
            ("Personal trainer", "Designs gym routines for strength and endurance."),
            ("Exercise coach", "Schedules training sessions and progressions."),
        ],
        "A beginner running plan",
    ),
    (
        "medical",
        "I have a headache and a fever, what could it be",
        ["health", "medical"],
        [
            ("Symptom checker", "Suggests possible conditions from symptoms."),
            ("Triage nurse", "Assesses complaints and advises whether to see a doctor."),
            ("Health advisor", "Answers questions about illness and medication."),
        ],
        "Is a rash with fever serious?",
    ),
    (
        "password",
        "my login stopped working, I need to get back into my account",
        ["it", "support"],
        [
            ("Password reset", "Resets credentials and unlocks user accounts."),
            ("Access recovery", "Restores sign in when users are locked out."),
            ("Identity desk", "Handles account unlocks and credential changes."),
        ],
        "Reset the password of jdoe",
    ),
    (
        "kubernetes",
        "my pods keep crashing after the deploy, help",
        ["devops", "kubernetes"],
        [
            ("Kubernetes operator", "Inspects clusters, deployments and failing containers."),
            ("Cluster doctor", "Diagnoses k8s workloads and restarts services."),
            ("Container ops", "Manages containers, rollouts and scaling."),
        ],
        "Why is my deployment in CrashLoopBackOff?",
    ),
    (
        "security-scan",
        "check our web app for vulnerabilities before launch",
        ["security", "scanning"],
        [
            ("Vulnerability scanner", "Scans hosts and applications for security flaws."),
            ("Pentest assistant", "Runs penetration tests and reports exploits."),
            ("Security audit", "Audits dependencies and configs for CVEs."),
        ],
        "Scan example.org for open ports",
    ),
    (
        "slides",
        "make a deck for Monday's pitch to investors",
        ["documents", "presentations"],
        [
            ("Presentation maker", "Builds slide decks from an outline."),
            ("Slide designer", "Designs PowerPoint and Keynote presentations."),
            ("Deck builder", "Creates presentations with charts and speaker notes."),
        ],
        "Ten slides about our roadmap",
    ),
    (
        "charts",
        "plot monthly revenue as bars for the last year",
        ["data", "visualization"],
        [
            ("Chart maker", "Draws charts and graphs from tables."),
            ("Data visualizer", "Turns datasets into plots and dashboards."),
            ("Graph builder", "Creates line, pie and bar charts."),
        ],
        "A pie chart of market share",
    ),
    (
        "spreadsheet",
        "clean up this excel file and fix the formulas",
        ["data", "spreadsheets"],
        [
            ("Spreadsheet assistant", "Edits workbooks, formulas and pivot tables."),
            ("Sheets helper", "Cleans and reshapes tabular data in sheets."),
            ("Workbook fixer", "Repairs broken cell references and calculations."),
        ],
        "Add a VLOOKUP between two sheets",
    ),
    (
        "crm",
        "log that I spoke with the buyer at Contoso and update the deal",
        ["sales", "crm"],
        [
            ("CRM updater", "Records contacts, leads and opportunities."),
            ("Sales pipeline", "Tracks deals through stages in the CRM."),
            ("Account manager", "Keeps customer records and activity history."),
        ],
        "Add a lead from the conference",
    ),
    (
        "support-ticket",
        "a user says the checkout page is broken, open an issue for the helpdesk",
        ["support", "ticketing"],
        [
            ("Ticket creator", "Opens support tickets and assigns them to agents."),
            ("Helpdesk", "Files incidents and tracks their resolution."),
            ("Service desk", "Manages customer cases in Zendesk or Jira."),
        ],
        "Create a P1 incident for the outage",
    ),
    (
        "plagiarism",
        "did this student copy their essay from the internet",
        ["education", "writing"],
        [
            ("Plagiarism checker", "Detects copied passages against web sources."),
            ("Originality scan", "Finds duplicated text and cites the origin."),
            ("Copy detector", "Compares documents for reused content."),
        ],
        "Check this thesis for copied text",
    ),
    (
        "tutor",
        "explain photosynthesis to a ten year old",
        ["education", "teaching"],
        [
            ("Tutor", "Teaches school subjects with clear explanations."),
            ("Homework helper", "Helps students understand lessons and exercises."),
            ("Study buddy", "Explains concepts and quizzes learners."),
        ],
        "Teach me fractions",
    ),
    (
        "real-estate",
        "what would a two bedroom flat in Lisbon cost to buy",
        ["property", "real estate"],
        [
            ("Property valuation", "Estimates home prices from comparable sales."),
            ("Real estate search", "Finds houses and apartments for sale or rent."),
            ("Housing market", "Reports on property prices by neighbourhood."),
        ],
        "Houses for sale under 300k in Austin",
    ),
    (
        "pets",
        "my dog keeps scratching his ears, should I worry",
        ["pets", "veterinary"],
        [
            ("Vet advisor", "Answers questions about animal health."),
            ("Pet care", "Advice on feeding, grooming and illness of cats and dogs."),
            ("Animal clinic", "Triage for pets and booking veterinary visits."),
        ],
        "Can cats eat tuna?",
    ),
    (
        "gardening",
        "why are the leaves on my tomato plants turning yellow",
        ["garden", "plants"],
        [
            ("Garden advisor", "Helps grow vegetables, flowers and trees."),
            ("Plant doctor", "Diagnoses plant diseases and pests."),
            ("Horticulture", "Tips on soil, watering and pruning."),
        ],
        "When to prune roses?",
    ),
    (
        "compress-video",
        "shrink this clip so it fits in a chat message",
        ["video", "media"],
        [
            ("Video compressor", "Reduces video file size and re-encodes formats."),
            ("Transcoder", "Converts footage between codecs and resolutions."),
            ("Media encoder", "Encodes movies to smaller MP4 files."),
        ],
        "Convert this MOV to MP4",
    ),
    (
        "geocode",
        "latitude and longitude of 10 Downing Street",
        ["maps", "geocoding"],
        [
            ("Geocoder", "Turns addresses into coordinates and back."),
            ("Address locator", "Finds the position of a street address on the globe."),
            ("Place resolver", "Resolves place names to GPS points."),
        ],
        "Coordinates of the Eiffel Tower",
    ),
    (
        "carbon",
        "how much CO2 does my commute produce each year",
        ["sustainability", "climate"],
        [
            ("Carbon footprint", "Estimates greenhouse gas emissions of activities."),
            ("Emissions calculator", "Computes the climate impact of travel and energy use."),
            ("Green score", "Measures environmental impact and suggests reductions."),
        ],
        "Footprint of a flight to NYC",
    ),
    (
        "poetry",
        "compose a short verse for my grandmother's birthday",
        ["writing", "creative"],
        [
            ("Poet", "Writes poems, haiku and rhymes on any theme."),
            ("Lyricist", "Creates song lyrics and verses."),
            ("Rhyme maker", "Composes poetry for cards and occasions."),
        ],
        "A haiku about autumn",
    ),
]

# Agents that do something else entirely, so the haystack is bigger than the needles.
FILLER_SKILLS: list[tuple[str, str, list[str]]] = [
    ("Echo", "Repeats the message it receives.", ["test"]),
    ("Ping", "Answers pong to check the connection.", ["test"]),
    ("Clock", "Tells the current time in a time zone.", ["time"]),
    ("Random numbers", "Draws random integers and dice rolls.", ["random"]),
    ("Unit converter", "Converts miles, kilograms and degrees.", ["units"]),
    ("Spell checker", "Corrects spelling mistakes.", ["writing"]),
    ("Password generator", "Creates strong random passwords.", ["security"]),
    ("Joke teller", "Tells a joke on request.", ["fun"]),
    ("Trivia", "Asks quiz questions.", ["fun"]),
    ("URL shortener", "Makes short links.", ["web"]),
    ("QR codes", "Encodes text into QR images.", ["web"]),
    ("Hash", "Computes SHA-256 digests.", ["crypto"]),
]

MAKERS = ["Acme", "Globex", "Initech", "Umbrella", "Stark", "Wayne", "Hooli", "Vandelay"]


@dataclass(frozen=True)
class Query:
    text: str
    expected: frozenset[str]  # agent ids
    capability: str


def agent_id(capability: str, variant: int) -> str:
    return f"{capability}-{variant + 1}"


def cards() -> dict[str, dict]:
    """Agent id -> a 1.0 card, for every agent of the set (more than 150)."""
    rng = random.Random(16)
    documents: dict[str, dict] = {}
    for key, _question, tags, variants, example in CAPABILITIES:
        for variant, (name, description) in enumerate(variants):
            maker = MAKERS[(len(documents) * 3) % len(MAKERS)]
            skills = [
                {
                    "id": f"{key}-skill",
                    "name": name,
                    "description": description,
                    "tags": tags,
                    "examples": [example],
                }
            ]
            # Some agents also do a small generic thing, as real agents often do.
            if rng.random() < 0.3:
                filler = rng.choice(FILLER_SKILLS)
                skills.append(
                    {
                        "id": filler[0].lower().replace(" ", "-"),
                        "name": filler[0],
                        "description": filler[1],
                        "tags": filler[2],
                    }
                )
            documents[agent_id(key, variant)] = _card(f"{maker} {name}", description, skills)
    for number in range(12):
        name, description, tags = FILLER_SKILLS[number]
        documents[f"utility-{number + 1}"] = _card(
            f"{name} agent",
            description,
            [
                {
                    "id": name.lower().replace(" ", "-"),
                    "name": name,
                    "description": description,
                    "tags": tags,
                }
            ],
        )
    return documents


def _card(name: str, description: str, skills: list[dict]) -> dict:
    return {
        "name": name,
        "description": description,
        "supportedInterfaces": [
            {"url": "http://agent.test/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "version": "1.0.0",
        "capabilities": {"streaming": False, "pushNotifications": False},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills,
    }


def queries() -> list[Query]:
    return [
        Query(question, frozenset(agent_id(key, v) for v in range(len(variants))), key)
        for key, question, _tags, variants, _example in CAPABILITIES
    ]


_WORD = re.compile(r"[a-z0-9]+")
_STOP = {
    "a",
    "an",
    "the",
    "i",
    "my",
    "to",
    "of",
    "in",
    "for",
    "and",
    "is",
    "at",
    "on",
    "this",
    "with",
    "what",
    "how",
    "do",
    "me",
    "from",
    "it",
    "be",
    "by",
    "or",
    "our",
    "that",
    "can",
}


def word_overlap(query: Query) -> int:
    """How many content words the question shares with the skills of its answers."""
    asked = set(_WORD.findall(query.text.lower())) - _STOP
    documents = cards()
    said: set[str] = set()
    for agent in query.expected:
        for skill in documents[agent]["skills"][:1]:
            text = " ".join([skill["name"], skill["description"], *skill["tags"]]).lower()
            said |= set(_WORD.findall(text))
    return len(asked & said)


def recall_at(ranked: list[str], expected: frozenset[str], k: int = 5) -> float:
    return len(set(ranked[:k]) & expected) / len(expected)


def reciprocal_rank(ranked: list[str], expected: frozenset[str]) -> float:
    for position, agent in enumerate(ranked, start=1):
        if agent in expected:
            return 1 / position
    return 0.0


def register_all(documents: dict[str, dict] | None = None) -> None:
    """Registers every agent of the set through ``services.agent_register`` (cards served by
    an ``httpx.MockTransport``), as production stores them: skills, facets and embeddings."""
    from registry import services
    from tests.factories import card_client

    for agent, document in (documents or cards()).items():
        with card_client(document) as client:
            services.agent_register(url=f"http://agent.test/{agent}", agent_id=agent, client=client)


def ranked_agents(matches: list[dict]) -> list[str]:
    """Agent ids in order of their best skill in a ``GET /a2a/skills`` answer."""
    return list(dict.fromkeys(match["agentId"] for match in matches))


def evaluate(search) -> tuple[float, float]:
    """Mean recall@5 and MRR over every question; ``search(text)`` returns ranked agent ids."""
    recalls, ranks = [], []
    for query in queries():
        ranked = search(query.text)
        recalls.append(recall_at(ranked, query.expected))
        ranks.append(reciprocal_rank(ranked, query.expected))
    return sum(recalls) / len(recalls), sum(ranks) / len(ranks)
