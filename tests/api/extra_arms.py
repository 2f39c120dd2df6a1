"""The two optional dense arms as the tests see them: the e5 second arm (RAG_SECOND_EMBEDDING=e5)
and the MiniLM English arm (RAG_ENGLISH_EMBEDDING=minilm). What both must do alike (their
life-cycle: off, switched on over an indexed tenant, written to while off, per tenant, deletion)
is `test_api_extra_dense_arms.py`; what each does of its own is in its own file."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.container import Container
from app.services.blocks.corpus import Corpus
from app.storage.second_index import ENGLISH_PREFIX, SECOND_PREFIX
from tests.api.harness import ApiHarness, ApiUser

SERVICE_MANUAL = {
    "warranty.txt": "The warranty covers manufacturing defects for two years from the date of "
    "purchase.",
    "reset.txt": "Reset the router by holding the power button for ten seconds.",
    "firmware.txt": "Firmware updates are installed from the settings page of the web console.",
    "battery.txt": "The battery charges fully in about three hours with the supplied adapter.",
    "storage.txt": "Store the device in a dry place between five and thirty degrees Celsius.",
    "fan.txt": "The fan becomes loud when dust collects on the intake grille; clean it monthly.",
    "service.txt": "Replacement parts can be ordered through an authorised service centre.",
    "display.txt": "The display dims automatically after two minutes without input to save power.",
}
ARABIC = {
    # "The camel is the ship of the desert; it endures thirst for many days."
    "camel.txt": "الجمل سفينة الصحراء، وهو يتحمل العطش أياما كثيرة.",
    # "The printer prints thirty pages a minute in black and white."
    "printer.txt": "تطبع الطابعة ثلاثين صفحة في الدقيقة بالأبيض والأسود.",
}
# The arm paragraph uploaded last (or while the option is off) in the life-cycle tests.
LATE = "display.txt"


@dataclass(frozen=True)
class ExtraArm:
    """One optional dense arm: how it is switched on, seen and filled, and a question whose
    gold paragraph it ranks first."""

    name: str  # the stage suffix: embed_query_<name>, dense_<name>, <name>_dense_rank
    option: dict[str, str]  # the setting that switches it on
    attribute: str  # the container's attribute holding it
    prefix: str  # its Chroma collections' names start with this
    reindexed: str  # what `reindex` prints before the count of chunks it embedded
    fill: Callable[[Corpus, str], int]  # embeds the tenant's chunks it lacks
    paragraphs: dict[str, str]  # file -> text, every one uploaded
    embedded: int  # how many of them the arm embeds
    question: str
    gold: str  # the file of the paragraph it ranks first for the question
    lone: str  # a paragraph of its own for another tenant, found by the question
    small_arms: dict[str, int]

    @property
    def rank(self) -> str:
        return f"{self.name}_dense_rank"

    @property
    def timings(self) -> set[str]:
        return {f"embed_query_{self.name}", f"dense_{self.name}"}

    def of(self, container: Container) -> Any:
        return getattr(container, self.attribute)

    def collections(self, container: Container) -> list[str]:
        client = container.corpus.index.client  # type: ignore[attr-defined]
        return [c.name for c in client.list_collections() if c.name.startswith(self.prefix + "_")]


SECOND = ExtraArm(
    name="second",
    option={"second_embedding": "e5"},
    attribute="second_arm",
    prefix=SECOND_PREFIX,
    reindexed="second dense arm: embedded",
    fill=Corpus.fill_second,
    paragraphs=SERVICE_MANUAL,
    embedded=len(SERVICE_MANUAL),
    # Arabic: the keyword arm matches nothing across scripts; USE ranks the service centre
    # third for it and e5 first.
    question="أين أصلح الجهاز؟",  # "Where do I get the device repaired?"
    gold="service.txt",
    lone="Repairs of the device are done at the shop.",
    small_arms={"dense_candidates": 2, "keyword_candidates": 2},
)
ENGLISH = ExtraArm(
    name="english",
    option={"english_embedding": "minilm"},
    attribute="english_arm",
    prefix=ENGLISH_PREFIX,
    reindexed="English arm: embedded",
    fill=Corpus.fill_english,
    paragraphs={**SERVICE_MANUAL, **ARABIC},
    embedded=len(SERVICE_MANUAL),  # English documents only
    question="How long until the battery is full?",
    gold="battery.txt",
    lone="Charging the battery takes one hour.",
    small_arms={"dense_candidates": 3, "keyword_candidates": 3},
)


def upload_all(harness: ApiHarness, user: ApiUser, paragraphs: dict[str, str]) -> dict[str, str]:
    """Upload every paragraph as its own file; source -> document id."""
    ids = {}
    for name, text in paragraphs.items():
        job = harness.upload_and_wait(user, name, text.encode())
        assert job["status"] == "done", job
        ids[name] = job["document_id"]
    return ids


def results(harness: ApiHarness, user: ApiUser, question: str, **extra: Any) -> list[dict]:
    """The results of a search for `question` (k=5 unless given)."""
    return list(harness.search(user, question, **{"k": 5, **extra})["results"])


def texts(found: list[dict]) -> list[str]:
    return [r["text"] for r in found]


def relogin(harness: ApiHarness, user: ApiUser) -> ApiUser:
    """The same user with a token from this app."""
    token = harness.login(user.username, user.password)
    return ApiUser(user.tenant, user.username, user.password, token, user.user_id)
