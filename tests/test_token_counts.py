"""Manifest token counts on demand: what ``with_token_counts`` counts, keeps and returns."""

from __future__ import annotations

from pathlib import Path

import pytest

from pioneer import CompiledPromptPayload, PromptCompileInput, PromptCompiler
from pioneer.caches import entry_bytes
from pioneer.providers import ChatMessage, ChatRequest, build_request_body
from pioneer.tokens import TiktokenCounter
from pioneer.turn import TurnAudit


class Tally:
    """A counter that counts characters and remembers every text it was asked about."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def count(self, text: str) -> int:
        self.asked.append(text)
        return len(text)


@pytest.fixture
def payload(home: Path) -> CompiledPromptPayload:
    (home / "SOUL.md").write_text("Calm.", encoding="utf-8")
    return PromptCompiler().compile(PromptCompileInput(
        workspace_root=home, dynamic_context="Monday.", extra_system="Be brief."))


def test_a_compile_leaves_the_counts_out(payload: CompiledPromptPayload) -> None:
    assert payload.manifest.sections
    assert all(record.tokens is None for record in payload.manifest.sections)
    assert "tokens" not in payload.manifest.to_json()


def test_every_record_is_counted_from_its_own_text(payload: CompiledPromptPayload) -> None:
    tally = Tally()
    counted = payload.with_token_counts(tally)
    texts = [section.text for section in payload.sections]
    assert tally.asked == texts
    assert [r.tokens for r in counted.manifest.sections] == [len(t) for t in texts]
    # Nothing else moves: texts, fingerprints and every other record field.
    assert counted.full_system_text == payload.full_system_text
    assert counted.manifest.model_copy(update={"sections": payload.manifest.sections}) == (
        payload.manifest
    )


def test_the_default_counter_gives_cl100k_counts(payload: CompiledPromptPayload) -> None:
    counter = TiktokenCounter()
    counted = payload.with_token_counts()
    assert [r.tokens for r in counted.manifest.sections] == [
        counter.count(section.text) for section in payload.sections
    ]


def test_counted_records_are_kept_and_a_full_count_is_returned_as_is(
    payload: CompiledPromptPayload,
) -> None:
    first = payload.manifest.sections[0].model_copy(update={"tokens": 999})
    partly = payload.model_copy(update={"manifest": payload.manifest.model_copy(
        update={"sections": [first, *payload.manifest.sections[1:]]})})
    tally = Tally()
    counted = partly.with_token_counts(tally)
    assert counted.manifest.sections[0].tokens == 999
    assert tally.asked == [section.text for section in payload.sections[1:]]
    assert counted.with_token_counts(tally) is counted
    assert len(tally.asked) == len(payload.sections) - 1


def test_a_record_without_its_text_stays_uncounted(payload: CompiledPromptPayload) -> None:
    tally = Tally()
    manifest = payload.manifest.with_token_counts(payload.sections[1:], tally)
    assert manifest.sections[0].tokens is None
    assert all(r.tokens is not None for r in manifest.sections[1:])
    assert payload.manifest.with_token_counts([], tally) is payload.manifest


def test_an_audited_round_keeps_the_counts_of_the_text_it_sent(
    payload: CompiledPromptPayload,
) -> None:
    request = ChatRequest(model="m", compiled_prompt=payload, messages=[ChatMessage.user("Hi")])
    body = build_request_body("openai-chat", request)
    audit = TurnAudit("u1", "t", "chat")
    kept = audit.add_round(payload.manifest, request, "openai-chat", body).manifest
    assert kept == payload.with_token_counts().manifest
    bare = ChatRequest(model="m", messages=[ChatMessage.user("Hi")])
    other = TurnAudit("u2", "t", "chat").add_round(
        payload.manifest, bare, "openai-chat", build_request_body("openai-chat", bare))
    assert other.manifest == payload.manifest  # no texts sent, nothing to count from


def test_a_million_spaces_are_counted_by_every_command(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A pasted run of a million spaces (tiktoken's regex gives up on it) is counted by
    inspect, the map, the budget gate and the manifest, not an internal error."""
    import json

    from support import run_cli

    monkeypatch.setenv("PIONEER_HOME", str(tmp_path / "home"))
    given = tmp_path / "input.json"
    given.write_text(json.dumps({"dynamic_context": "Look:" + " " * 1_000_000 + "done.",
                                 "workspace_root": str(tmp_path)}))
    code, out, err = run_cli("compile", "--manifest", "--quiet", "--input", str(given),
                             "--profile", "minimal")
    assert (code, err) == (0, "")
    tokens = {record["id"]: record["tokens"] for record in json.loads(out)["sections"]}
    assert tokens["dynamic_context"] > 7_800
    code, out, err = run_cli("inspect", "--input", str(given), "--profile", "minimal")
    assert (code, err) == (0, "") and f" {tokens['dynamic_context']} " in out
    code, out, err = run_cli("inspect", "--input", str(given), "--profile", "minimal",
                             "--html", str(tmp_path / "map.html"))
    assert (code, out) == (0, "") and err.startswith(f"wrote {tmp_path / 'map.html'}: ")
    assert (tmp_path / "map.html").read_text().startswith("<!DOCTYPE html>")
    code, out, err = run_cli("check", "--max-tokens", "100", "--input", str(given), "minimal")
    total = sum(tokens.values())
    assert code == 1 and f"minimal {total} " in out + err


def test_the_counter_keeps_counts_not_texts() -> None:
    # Room for ten counts (an entry is about 370 bytes: docs/speed.md, "Caches").
    counter = TiktokenCounter(cache_bytes=10 * 380)
    encoded: list[str] = []
    encode = counter._encode_len
    counter._encode_len = lambda text: (encoded.append(text), encode(text))[1]  # type: ignore[method-assign]
    long = "word " * 20_000
    texts = [long, "the same length? " * 2, "other same length" * 2, "x"]
    counts = [counter.count(text) for text in texts]
    assert counts == [encode(text) for text in texts]
    # Each count costs about the same whatever the text's size (the text is not kept):
    # the key's tokenizer name, hash and length and the count, measured as stored.
    sizes = [entry_bytes((counter.tokenizer, hash(text), len(text)), count)
             for text, count in zip(texts, counts, strict=True)]
    stats = counter.cache.stats()
    assert (stats.entries, stats.bytes) == (4, sum(sizes))
    assert max(sizes) <= 380 and max(sizes) - min(sizes) <= 16, sizes
    # A text of the same length but other characters is counted on its own; a copy of a
    # text (another string object) is a hit, as the text itself is.
    assert [counter.count("".join(list(text))) for text in texts] == counts
    assert encoded == texts
    # Least recently used counts go first once the budget is full.
    for n in range(10):
        counter.count(f"filler {n}")
    counter.count(long)
    assert encoded[-1] == long and counter.cache.stats().entries == 10
