"""Hand-written tables for the synthetic memory world: topics, sentence frames, vocabularies.

A :class:`Frame` is one sentence pattern: the fact it writes, the near-verbatim questions that
reuse the fact's own wording, the paraphrase questions that say the same with other words,
and a short noun phrase (``subject``) used to build multi-subject questions.

Templates use ``str.format`` fields. A field's *root* is the part before the first ``_``:
``{thing}`` is the slot value, ``{thing_alt}`` its paraphrase wording and ``{pref_pick}`` a named
part of the value (see :class:`Term`). A root ending in digits draws from the same vocabulary
as the root without them but never repeats it (``{tool2}`` is a tool other than ``{tool}``).
The roots ``date`` (ISO day, "2024-03-12"), ``month`` ("March 2024") and ``number`` are
computed by the generator rather than drawn from a vocabulary.

Paraphrase templates must avoid the fact's own content words except names (people, tools,
projects, places); that is what separates dense, keyword and cross-encoder retrieval.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass

COMPUTED_ROOTS = frozenset({"date", "month", "number"})


@dataclass(frozen=True)
class Term:
    """One slot value: its text, how a paraphrase says it, and optional named parts."""

    text: str
    alt: str = ""
    parts: tuple[tuple[str, str], ...] = ()

    @property
    def alt_text(self) -> str:
        """The paraphrase wording (the text itself for names, which have no synonym)."""
        return self.alt or self.text


def field_roots(template: str) -> frozenset[str]:
    """Roots of the format fields in ``template`` (``"{thing_alt} {tool2}"`` -> thing, tool2)."""
    names = (name for _, name, _, _ in string.Formatter().parse(template) if name)
    return frozenset(name.split("_", 1)[0] for name in names)


@dataclass(frozen=True)
class Frame:
    """One sentence pattern: a fact, its questions and its subject phrase."""

    name: str
    fact: str
    near_verbatim: tuple[str, ...]
    paraphrase: tuple[str, ...]
    subject: str
    numbers: tuple[int, int] = (2, 60)
    tags: tuple[str, ...] = ()
    ahead: bool = False  # its {date}/{month} lies after the time it was written down

    def roots(self) -> frozenset[str]:
        """Every slot root used by any template of this frame."""
        templates = (self.fact, self.subject, *self.near_verbatim, *self.paraphrase)
        return frozenset().union(*(field_roots(t) for t in templates))

    def key_roots(self) -> frozenset[str]:
        """Roots present in every question: two facts of a frame must differ on these."""
        questions = (*self.near_verbatim, *self.paraphrase)
        return frozenset.intersection(*(field_roots(q) for q in questions))


@dataclass(frozen=True)
class Topic:
    """One memory space of the world with its vocabulary and frames."""

    space_id: str
    description: str
    tags: tuple[str, ...]
    vocab: Mapping[str, tuple[Term, ...]]
    frames: tuple[Frame, ...]
    milestone: Frame | None = None
    user_id: str | None = None


def names(*texts: str) -> tuple[Term, ...]:
    """Terms without a paraphrase wording (proper names)."""
    return tuple(Term(t) for t in texts)


def aliased(*pairs: tuple[str, str]) -> tuple[Term, ...]:
    """Terms with a paraphrase wording: ``("invoice service", "billing backend")``."""
    return tuple(Term(text, alt) for text, alt in pairs)


CITIES = names("Lisbon", "Tokyo", "Berlin", "Toronto", "Seoul", "Nairobi", "Oslo", "Melbourne",
               "Austin", "Dublin")
WEEKDAYS = names("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")

# --------------------------------------------------------------------------- team frames
TEAM_FRAMES: tuple[Frame, ...] = (
    Frame(
        "migration",
        "{person} migrated the {thing} to {tool} on {date}.",
        ("When did {person} migrate the {thing} to {tool}?",
         "Who migrated the {thing} to {tool}?"),
        ("What day did we finish moving our {thing_alt} over onto {tool}?",
         "Which colleague handled switching our {thing_alt} across to {tool}?",
         "Remind me who carried our {thing_alt} over onto {tool}."),
        "the {thing} migration to {tool}",
    ),
    Frame(
        "improvement",
        "{person} cut {metric} on the {thing} by {number} percent in {month}.",
        ("By how much did {person} cut {metric} on the {thing}?",
         "Who cut {metric} on the {thing} by {number} percent?"),
        ("How large was the drop in {metric_alt} for our {thing_alt}?",
         "What gain did we get on {metric_alt} for the {thing_alt}?",
         "How far down did {metric_alt} go for our {thing_alt}?"),
        "the {metric} cut on the {thing}",
        numbers=(5, 60),
    ),
    Frame(
        "incident",
        "On {date}, the {thing} went down for {number} minutes after a bad {tool} deploy; "
        "{person} led the incident.",
        ("Who led the incident when the {thing} went down after a bad {tool} deploy?",
         "How many minutes did the {thing} go down after the bad {tool} deploy?"),
        ("Which person ran point on the {thing_alt} outage caused by a faulty {tool} rollout?",
         "How long was our {thing_alt} unavailable because a {tool} release broke it?",
         "What happened when a broken {tool} release knocked out our {thing_alt}?"),
        "the {thing} outage after the {tool} deploy",
        numbers=(3, 180),
    ),
    Frame(
        "decision",
        "The {team} team decided to adopt {tool} instead of {tool2} for the {thing}.",
        ("What did the {team} team decide to adopt instead of {tool2} for the {thing}?",
         "Which tool did the {team} team decide to adopt for the {thing} instead of {tool2}?"),
        ("What did our group pick over {tool2} to power the {thing_alt}?",
         "Which option won against {tool2} when choosing a stack for our {thing_alt}?",
         "Why was {tool2} passed over as the platform behind our {thing_alt}?"),
        "the choice of {tool} over {tool2} for the {thing}",
    ),
    Frame(
        "ownership",
        "{person} owns the {thing} and reviews every change to it.",
        ("Who owns the {thing}?",
         "Who reviews every change to the {thing}?"),
        ("Which teammate is responsible for our {thing_alt}?",
         "Whom should I ask to approve edits touching the {thing_alt}?",
         "Who is accountable when something breaks in our {thing_alt}?"),
        "ownership of the {thing}",
    ),
    Frame(
        "kickoff",
        "The {project} project kicked off with a workshop in {place} in {month}.",
        ("Where did the {project} project kick off with a workshop?",
         "When did the {project} project kick off with a workshop in {place}?"),
        ("In which city was the opening session for {project} held?",
         "What month did work on {project} formally begin?",
         "Where did everyone gather to launch {project}?"),
        "the {project} kickoff",
    ),
    Frame(
        "review",
        "{person} scheduled the {thing} design review for {date} as part of project {project}.",
        ("When is the {thing} design review for project {project} scheduled?",
         "Who scheduled the {thing} design review for project {project}?"),
        ("What day will we walk through the plans for the {thing_alt} within {project}?",
         "Who booked the {project} architecture discussion about our {thing_alt}?",
         "When do we go over the {project} proposal covering our {thing_alt}?"),
        "the {thing} design review for project {project}",
        ahead=True,
    ),
    Frame(
        "budget",
        "Project {project} has a budget of {number} thousand dollars for the {thing}.",
        ("What budget does project {project} have for the {thing}?",
         "How many thousand dollars does project {project} have for the {thing}?"),
        ("How much money is set aside in {project} to fund our {thing_alt}?",
         "What spending cap applies to the {thing_alt} under {project}?",
         "How much cash can {project} spend on our {thing_alt}?"),
        "the {project} budget for the {thing}",
        numbers=(20, 500),
    ),
    Frame(
        "bug",
        "{person} found a bug in the {thing} where {metric} spikes whenever {tool} retries.",
        ("Who found the bug in the {thing} where {metric} spikes whenever {tool} retries?",
         "What spikes in the {thing} whenever {tool} retries?"),
        ("Which colleague discovered that {tool} trying again makes {metric_alt} jump in our "
         "{thing_alt}?",
         "What defect shows up in our {thing_alt} when {tool} repeats a failed call?",
         "Why does {metric_alt} climb in the {thing_alt} after {tool} makes another attempt?"),
        "the {thing} bug with {tool} retries",
    ),
    Frame(
        "joined",
        "{person} joined the {team} team in {month} to work on the {thing}.",
        ("When did {person} join the {team} team?",
         "What did {person} join the {team} team to work on?"),
        ("Since what month has {person} been part of our group?",
         "Which area was {person} brought in to focus on?",
         "What has {person} been busy with since arriving?"),
        "{person} joining the {team} team",
    ),
)


def _milestone(fact: str, near: tuple[str, ...], para: tuple[str, ...], subject: str) -> Frame:
    return Frame("milestone", fact, near, para, subject)


def _team(space_id: str, description: str, tags: tuple[str, ...], *, people: tuple[str, ...],
          things: tuple[tuple[str, str], ...], tools: tuple[str, ...],
          metrics: tuple[tuple[str, str], ...], projects: tuple[str, ...],
          milestone: Frame) -> Topic:
    vocab = {"team": names(space_id), "person": names(*people), "thing": aliased(*things),
             "tool": names(*tools), "metric": aliased(*metrics), "project": names(*projects),
             "place": CITIES}
    return Topic(space_id, description, tags, vocab, TEAM_FRAMES, milestone)


PAYMENTS = _team(
    "payments", "Payments team: billing, invoices, Stripe migration",
    ("team:payments", "topic:billing"),
    people=("Bob", "Priya", "Marcus", "Yuki", "Elena"),
    things=(("invoice service", "billing backend"), ("refund flow", "money-back process"),
            ("checkout page", "purchase screen"), ("tax calculator", "VAT engine"),
            ("payout scheduler", "merchant settlement job"),
            ("subscription ledger", "recurring-charge records"),
            ("fraud screen", "chargeback filter"), ("pricing table", "price list")),
    tools=("Adyen", "Chargebee", "Braintree", "Recurly", "Avalara", "Paddle"),
    metrics=(("checkout latency", "payment wait time"), ("failed charges", "declined cards"),
             ("refund backlog", "pending reimbursements"), ("invoice errors", "billing mistakes")),
    projects=("Alpha", "Ledger", "Tally"),
    milestone=_milestone(
        "The payments team finished migrating invoices to Stripe on {date}.",
        ("When did the payments team finish migrating invoices to Stripe?",
         "On what date did the payments team finish migrating invoices to Stripe?"),
        ("When was our billing fully moved over onto Stripe?",
         "What day did we complete the switch of our invoicing to Stripe?",
         "When did Stripe take over all of our billing?"),
        "finishing the payments migration"),
)

MOBILE = _team(
    "mobile", "Mobile team: mobile app rewrite, iOS/Android releases",
    ("team:mobile", "topic:releases"),
    people=("Chen", "Fatima", "Lucas", "Sofia", "Dmitri"),
    things=(("iOS app", "iPhone client"), ("Android app", "Kotlin client"),
            ("push notification service", "phone alert sender"),
            ("offline sync engine", "no-network data cache"), ("login screen", "sign-in view"),
            ("crash reporter", "error telemetry hook"), ("release train", "shipping cadence"),
            ("deep link router", "URL handoff layer")),
    tools=("Fastlane", "Firebase", "Sentry", "Bitrise", "Expo", "Flutter"),
    metrics=(("crash rate", "how often things die"), ("cold start time", "launch delay"),
             ("app size", "download footprint"), ("battery drain", "power usage")),
    projects=("Phoenix", "Comet", "Nova"),
    milestone=_milestone(
        "The mobile team started rewriting the mobile app on {date}.",
        ("When did the mobile team start rewriting the mobile app?",
         "On what date did the mobile team start rewriting the mobile app?"),
        ("What day did work begin on rebuilding our phone application from scratch?",
         "When did the ground-up redo of the handset client kick off?",
         "When did we begin redoing our smartphone product?"),
        "starting the mobile rewrite"),
)

INFRA = _team(
    "infra", "Infrastructure team: Kubernetes, CI pipelines, on-call",
    ("team:infra", "topic:kubernetes"),
    people=("Grace", "Omar", "Hannah", "Tomas", "Ingrid"),
    things=(("deploy pipeline", "release automation"), ("on-call rotation", "pager schedule"),
            ("container registry", "image store"), ("service mesh", "sidecar network layer"),
            ("log shipper", "telemetry forwarder"), ("secrets vault", "credential store"),
            ("build cache", "compile artifact store"), ("load balancer", "traffic distributor")),
    tools=("Terraform", "ArgoCD", "Jenkins", "GitHub Actions", "Prometheus", "Helm"),
    metrics=(("deploy time", "release duration"), ("pager alerts", "overnight pages"),
             ("build failures", "broken compiles"), ("cloud spend", "hosting bill")),
    projects=("Atlas", "Bedrock", "Harbor"),
    milestone=_milestone(
        "The infra team finished moving every service onto Kubernetes on {date}.",
        ("When did the infra team finish moving every service onto Kubernetes?",
         "On what date did the infra team finish moving every service onto Kubernetes?"),
        ("What day was the whole fleet running on Kubernetes at last?",
         "When did our platform group complete the container orchestration switchover?",
         "When was the last workload put under Kubernetes?"),
        "finishing the Kubernetes move"),
)

RESEARCH = _team(
    "research", "Research team: retrieval benchmarks, evaluation, model experiments",
    ("team:research", "topic:evaluation"),
    people=("Ravi", "Mei", "Jonas", "Amara", "Felix"),
    things=(("eval harness", "scoring rig"), ("retrieval benchmark", "search test suite"),
            ("embedding model", "vector encoder"), ("reranker", "second-stage ranker"),
            ("annotation tool", "labeling interface"), ("training cluster", "GPU farm"),
            ("query log dataset", "search history corpus"),
            ("ablation notebook", "component-removal study")),
    tools=("PyTorch", "JAX", "Weights & Biases", "Ray", "DuckDB", "MLflow"),
    metrics=(("eval runtime", "scoring duration"), ("GPU cost", "accelerator bill"),
             ("label noise", "annotation mistakes"), ("recall gap", "missed relevant hits")),
    projects=("Lumen", "Quarry", "Sextant"),
    milestone=_milestone(
        "The research team published the memory recall study on {date}.",
        ("When did the research team publish the memory recall study?",
         "On what date did the research team publish the memory recall study?"),
        ("When did the lab put out its write-up on how well agents remember?",
         "What day did the findings about agent remembering go public?",
         "When was our paper on retention by assistants released?"),
        "publishing the memory recall study"),
)

HIRING = _team(
    "hiring", "Hiring: recruiting pipeline, interviews, offers",
    ("team:hiring", "topic:recruiting"),
    people=("Nadia", "Pedro", "Olivia", "Kwame", "Sara"),
    things=(("interview scheduler", "meeting booking bot"), ("careers page", "jobs website"),
            ("take-home exercise", "homework assignment"),
            ("referral form", "employee recommendation intake"),
            ("offer letter generator", "contract drafting tool"),
            ("candidate portal", "applicant dashboard"),
            ("phone screen script", "first-call question list"),
            ("onboarding checklist", "first-week plan")),
    tools=("Greenhouse", "Lever", "Ashby", "Calendly", "DocuSign", "Workday"),
    metrics=(("time to hire", "weeks until a signed contract"),
             ("interview no-shows", "missed candidate calls"),
             ("offer declines", "rejected job proposals"), ("sourcing cost", "recruiting spend")),
    projects=("Magnet", "Beacon", "Compass"),
    milestone=_milestone(
        "The hiring team opened the senior engineer requisitions on {date}.",
        ("When did the hiring team open the senior engineer requisitions?",
         "On what date did the hiring team open the senior engineer requisitions?"),
        ("What day did recruiting start looking for experienced developers?",
         "When did we begin advertising the staff-level coding roles?",
         "When did the search for veteran programmers get going?"),
        "opening the senior engineer requisitions"),
)

DESIGN = _team(
    "design", "Design team: design system, UX research, accessibility",
    ("team:design", "topic:ux"),
    people=("Lena", "Hugo", "Aisha", "Mateo", "Zoe"),
    things=(("component library", "UI kit"), ("color palette", "brand hues"),
            ("onboarding flow", "first-run experience"), ("icon set", "glyph collection"),
            ("settings screen", "preferences panel"), ("typography scale", "font sizing system"),
            ("empty state illustration", "blank-screen artwork"),
            ("prototype", "clickable mockup")),
    tools=("Figma", "Storybook", "Framer", "Sketch", "Zeroheight", "Maze"),
    metrics=(("contrast failures", "accessibility color issues"),
             ("task completion time", "how long users take"),
             ("design debt", "inconsistent UI leftovers"),
             ("handoff delays", "slow spec delivery")),
    projects=("Prism", "Canvas", "Mosaic"),
    milestone=_milestone(
        "The design team shipped the new design system on {date}.",
        ("When did the design team ship the new design system?",
         "On what date did the design team ship the new design system?"),
        ("What day did the refreshed UI guidelines go live?",
         "When was our updated visual language released?",
         "When could everyone start using the revised look-and-feel rules?"),
        "shipping the new design system"),
)

SUPPORT = _team(
    "support", "Customer support: help center, tickets, escalations",
    ("team:support", "topic:tickets"),
    people=("Isaac", "Mariam", "Victor", "Leila", "Sam"),
    things=(("help center", "self-service docs site"), ("ticket router", "case assignment rules"),
            ("chat widget", "live messaging bubble"),
            ("escalation runbook", "severity handoff guide"),
            ("macro library", "canned reply collection"), ("status page", "uptime notice board"),
            ("refund approval queue", "reimbursement sign-off list"),
            ("feedback survey", "satisfaction poll")),
    tools=("Zendesk", "Intercom", "Freshdesk", "Statuspage", "Gong", "Front"),
    metrics=(("first response time", "wait before a reply"),
             ("ticket backlog", "unanswered cases"), ("escalation rate", "cases sent upward"),
             ("CSAT drop", "satisfaction decline")),
    projects=("Anchor", "Relay", "Echo"),
    milestone=_milestone(
        "The support team launched weekend phone coverage on {date}.",
        ("When did the support team launch weekend phone coverage?",
         "On what date did the support team launch weekend phone coverage?"),
        ("When did customers first get to call us on Saturdays?",
         "What day did our agents begin answering calls at weekends?",
         "Since when can people ring our helpdesk on Sundays?"),
        "launching weekend phone coverage"),
)

# --------------------------------------------------------------------------- personal space
PERSONAL_FRAMES: tuple[Frame, ...] = (
    Frame(
        "preference",
        "{owner} prefers {pref_pick} over {pref_other} for {pref}.",
        ("What does {owner} prefer over {pref_other} for {pref}?",
         "Does {owner} prefer {pref_pick} over {pref_other} for {pref}?"),
        ("What does {owner} like to use for {pref_alt}?",
         "Which option wins for {owner} when it comes to {pref_alt}?",
         "What is {owner}'s favourite choice for {pref_alt}?"),
        "{owner}'s pick for {pref}",
        tags=("topic:tools",),
    ),
    Frame(
        "allergy",
        "{owner} is allergic to {food}, so team dinners should avoid it.",
        ("Is {owner} allergic to {food}?",
         "Should team dinners avoid {food} because of {owner}?"),
        ("Does eating {food_alt} make {owner} sick?",
         "Can {owner} safely have {food_alt} at a group meal?",
         "Is {food_alt} off the menu for {owner}?"),
        "{owner}'s allergy to {food}",
        tags=("topic:food",),
    ),
    Frame(
        "trip",
        "{owner} is flying to {place} on {date} for {trip}.",
        ("When is {owner} flying to {place}?",
         "Why is {owner} flying to {place} on {date}?"),
        ("What day does {owner}'s plane depart for {place}?",
         "What takes {owner} to {place} next?",
         "When does {owner} head off toward {place}?"),
        "{owner}'s flight to {place}",
        tags=("topic:travel",),
        ahead=True,
    ),
    Frame(
        "restaurant",
        "{owner}'s favourite restaurant in {place} is {restaurant}, a {restaurant_cuisine} place.",
        ("What is {owner}'s favourite restaurant in {place}?",
         "Which {restaurant_cuisine} place in {place} is {owner}'s favourite restaurant?"),
        ("Where does {owner} love to eat when visiting {place}?",
         "Which spot for dinner around {place} would {owner} recommend?",
         "Where should we book a table in {place} to please {owner}?"),
        "{owner}'s favourite place to eat in {place}",
        tags=("topic:food",),
    ),
    Frame(
        "exercise",
        "{owner} goes {activity} every {weekday} morning before work.",
        ("When does {owner} go {activity}?",
         "Which morning does {owner} go {activity} before work?"),
        ("What day of the week is {owner}'s {activity_alt} session?",
         "On which weekday does {owner} fit in {activity_alt}?",
         "When can we not book {owner} early because of {activity_alt}?"),
        "{owner}'s {activity} routine",
        tags=("topic:fitness",),
    ),
    Frame(
        "reading",
        "{owner} is reading {book} and hopes to finish it by {month}.",
        ("When does {owner} hope to finish reading {book}?",
         "Is {owner} reading {book}?"),
        ("By what month will {owner} be done with {book_alt}?",
         "What's {owner}'s target for completing {book_alt}?",
         "Has {owner} got a deadline to get through {book_alt}?"),
        "{owner}'s reading of {book}",
        tags=("topic:books",),
        ahead=True,
    ),
    Frame(
        "subscription",
        "{owner} pays {number} dollars a month for {service}.",
        ("How much does {owner} pay each month for {service}?",
         "What does {owner} pay for {service} per month?"),
        ("What is {owner}'s monthly cost for {service_alt}?",
         "How many bucks go to {service_alt} out of {owner}'s budget every month?",
         "What does {service_alt} set {owner} back monthly?"),
        "{owner}'s subscription to {service}",
        numbers=(5, 40),
        tags=("topic:money",),
    ),
)


def _pref(task: str, alt: str, pick: str, other: str) -> Term:
    return Term(task, alt, (("pick", pick), ("other", other)))


def _restaurant(name: str, cuisine: str) -> Term:
    return Term(name, "", (("cuisine", cuisine),))


PERSONAL = Topic(
    "personal", "Alice's personal preferences: food, tools, travel",
    ("person:alice", "topic:preferences"),
    {
        "owner": names("Alice"),
        "pref": (
            _pref("writing code", "programming", "Neovim", "VS Code"),
            _pref("managing JavaScript packages", "installing node dependencies", "pnpm", "npm"),
            _pref("taking notes", "jotting down ideas", "Obsidian", "Notion"),
            _pref("terminal work", "shell sessions", "WezTerm", "iTerm2"),
            _pref("drawing diagrams", "sketching architecture", "Excalidraw", "Miro"),
            _pref("tracking tasks", "to-do lists", "Todoist", "Things"),
            _pref("reading email", "checking mail", "Superhuman", "Gmail"),
            _pref("long-haul flights", "flying overseas", "KLM", "Lufthansa"),
            _pref("video calls", "remote meetings", "Zoom", "Google Meet"),
            _pref("password storage", "keeping credentials safe", "1Password", "Bitwarden"),
        ),
        "food": aliased(("peanuts", "groundnuts"), ("shellfish", "prawns"),
                        ("sesame", "tahini"), ("gluten", "wheat flour"),
                        ("dairy", "milk products"), ("kiwi", "kiwifruit")),
        "place": CITIES,
        "trip": aliased(("a conference", "an industry event"),
                        ("a friend's wedding", "a marriage celebration"),
                        ("a hiking holiday", "a trekking vacation"),
                        ("a customer visit", "meeting a client")),
        "restaurant": (_restaurant("Casa Lume", "Portuguese"),
                       _restaurant("Kappa Yokocho", "Japanese"),
                       _restaurant("Zum Anker", "German"), _restaurant("Little Saffron", "Indian"),
                       _restaurant("Taqueria Sol", "Mexican"), _restaurant("Fjordbord", "Nordic"),
                       _restaurant("Hanok Table", "Korean"),
                       _restaurant("Nyama Choma House", "Kenyan")),
        "activity": aliased(("running", "jogging"), ("swimming", "pool laps"),
                            ("climbing", "bouldering"), ("cycling", "bike rides"),
                            ("rowing", "erg training"), ("hiking", "trail walks")),
        "weekday": WEEKDAYS,
        "book": aliased(("Designing Data-Intensive Applications", "the Kleppmann book"),
                        ("The Pragmatic Programmer", "the Hunt-Thomas classic"),
                        ("Dune", "the Herbert novel"), ("Project Hail Mary", "the Weir novel"),
                        ("The Left Hand of Darkness", "the Le Guin novel"),
                        ("Sapiens", "the Harari history")),
        "service": aliased(("Spotify", "music streaming"),
                           ("GitHub Copilot", "the AI coding assistant"),
                           ("iCloud storage", "Apple cloud backup"),
                           ("a climbing gym", "the bouldering hall"),
                           ("The Economist", "a weekly news magazine"),
                           ("Duolingo Plus", "language-learning lessons")),
    },
    PERSONAL_FRAMES,
    Frame(
        "milestone",
        "{owner} moved into a new apartment in {place} on {date}.",
        ("When did {owner} move into the new apartment in {place}?",
         "On what date did {owner} move into a new apartment?"),
        ("What day did {owner} relocate to a different flat?",
         "When did {owner} change homes?",
         "Since when has {owner} lived at the current address?"),
        "{owner}'s apartment move",
        tags=("topic:home",),
    ),
    user_id="alice",
)

# --------------------------------------------------------------------------- default space
INBOX_FRAMES: tuple[Frame, ...] = (
    Frame(
        "reminder",
        "Reminder: the {event} is on {date}.",
        ("When is the {event}?", "What date is the {event} on?"),
        ("What day should I keep free for the {event_alt}?",
         "When does the {event_alt} happen?"),
        "the {event}",
        ahead=True,
    ),
    Frame(
        "room",
        "The {room} meeting room is closed for repairs until {date}.",
        ("Until when is the {room} meeting room closed for repairs?",
         "Why is the {room} meeting room closed?"),
        ("When can we book {room} again?", "Is {room} usable right now?"),
        "the {room} room closure",
        ahead=True,
    ),
    Frame(
        "expenses",
        "Expense reports for {month} are due by {date}.",
        ("When are expense reports for {month} due?",
         "By what date are the {month} expense reports due?"),
        ("What is the deadline to claim costs incurred in {month}?",
         "How long do I have to file {month} receipts?"),
        "the {month} expense deadline",
        ahead=True,
    ),
)

INBOX = Topic(
    "inbox", "Inbox: general notes and reminders that fit no other space",
    ("topic:general",),
    {
        "event": aliased(("company all-hands", "whole-staff meeting"),
                         ("summer party", "warm-season celebration"),
                         ("security training", "phishing awareness course"),
                         ("quarterly town hall", "leadership Q&A"),
                         ("fire drill", "evacuation exercise")),
        "room": names("Aurora", "Birch", "Cedar", "Juniper"),
    },
    INBOX_FRAMES,
)

TOPIC_POOL: tuple[Topic, ...] = (PAYMENTS, MOBILE, INFRA, PERSONAL, RESEARCH, HIRING, DESIGN,
                                 SUPPORT)

# --------------------------------------------------------------------------- query tables
# Each joins two subjects with a splitter that ``expand_query`` understands (never "or").
MULTI_TEMPLATES: tuple[str, ...] = (
    "What happened with {a} and {b}?",
    "Compare {a} versus {b}.",
    "Tell me about {a}, then {b}.",
    "What do we know about {a} and {b}?",
)
WEEKS_TEMPLATE = "How many weeks between {a} and {b}?"
# The worked multi-subject case: (first topic, second topic) whose milestones it joins.
WORKED_PAIR = ("payments", "mobile")

# Off-topic questions no space can answer: (template, values for its one slot {x}).
UNANSWERABLE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("What is the orbital period of {x}?",
     ("Europa", "Titan", "Ganymede", "Phobos", "Triton")),
    ("When does the {x} bed in the community garden usually bloom?",
     ("tulip", "peony", "dahlia", "lavender", "camellia")),
    ("Which route does the {x} take on its autumn migration?",
     ("Arctic tern", "bar-tailed godwit", "barn swallow", "white stork", "osprey")),
    ("Who won the {x} national chess championship?",
     ("1972", "1985", "1997", "2003", "2011")),
    ("How old are the basalt columns at {x}?",
     ("Giant's Causeway", "Fingal's Cave", "Devils Postpile", "Svartifoss", "Staffa")),
    ("Which aria closes the second act of {x}?",
     ("Tosca", "Carmen", "La Traviata", "Rigoletto", "Aida")),
    ("How many stitches does the {x} knitting pattern start with?",
     ("fisherman rib", "herringbone", "seed stitch", "cable braid", "moss lace")),
    ("Which king built {x}?",
     ("Caernarfon Castle", "Chambord", "Himeji Castle", "Bran Castle", "Neuschwanstein")),
)

# One-word edits for near-duplicates (first match in the sentence is replaced).
WORD_SWAPS: tuple[tuple[str, str], ...] = (
    ("migrated", "moved"), ("finished", "completed"), ("started", "began"),
    ("decided", "chose"), ("found", "spotted"), ("owns", "maintains"),
    ("scheduled", "booked"), ("joined", "entered"), ("prefers", "likes"),
    ("budget", "allowance"), ("workshop", "session"), ("every", "each"),
    ("cut", "reduced"), ("published", "released"), ("shipped", "released"),
    ("opened", "posted"), ("launched", "introduced"), ("hopes", "plans"),
)
