"""The vault: encrypted at rest, key file 0600 (refused when wider), set/get/list/delete, redaction."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest

from hanzo_hub.errors import VaultError
from hanzo_hub.sandbox.vault import RedactingFilter, Redactor, Vault


def test_secrets_round_trip_encrypted_at_rest(tmp_path: Path) -> None:
    vault = Vault(tmp_path / "v", keyring_service=None)
    vault.set("GITHUB_TOKEN", "ghp_supersecret123")
    assert vault.get("GITHUB_TOKEN") == "ghp_supersecret123"
    assert vault.list() == ["GITHUB_TOKEN"]
    assert b"ghp_supersecret123" not in vault.file.read_bytes()
    assert stat.S_IMODE(vault.key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(vault.file.stat().st_mode) == 0o600
    again = Vault(tmp_path / "v", keyring_service=None)
    assert again.get("GITHUB_TOKEN") == "ghp_supersecret123"
    assert again.delete("GITHUB_TOKEN")
    assert not again.delete("GITHUB_TOKEN")
    assert again.get("GITHUB_TOKEN") is None


def test_keyring_without_backend_falls_back_to_the_key_file(tmp_path: Path) -> None:
    vault = Vault(tmp_path / "v")
    vault.set("A", "value-aaaa")
    assert vault.key_source in {"file", "keyring"}
    assert vault.get("A") == "value-aaaa"


def test_world_readable_key_file_is_refused(tmp_path: Path) -> None:
    Vault(tmp_path / "v", keyring_service=None).set("A", "value-aaaa")
    (tmp_path / "v" / "vault.key").chmod(0o644)
    with pytest.raises(VaultError):
        Vault(tmp_path / "v", keyring_service=None)


def test_wrong_key_does_not_decrypt(tmp_path: Path) -> None:
    vault = Vault(tmp_path / "v", keyring_service=None)
    vault.set("A", "value-aaaa")
    vault.key_file.unlink()
    with pytest.raises(VaultError):
        Vault(tmp_path / "v", keyring_service=None).get("A")


def test_bad_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(VaultError):
        Vault(tmp_path / "v", keyring_service=None).set("has space", "x")


def test_redactor_replaces_plain_encoded_forms() -> None:
    redactor = Redactor({"TOKEN": "s3cr3t/value+1", "SHORT": "ab"})
    text = "plain s3cr3t/value+1 url s3cr3t%2Fvalue%2B1 b64 czNjcjN0L3ZhbHVlKzE= ab"
    assert redactor.redact(text) == "plain [redacted:TOKEN] url [redacted:TOKEN] b64 [redacted:TOKEN] ab"


def test_logging_filter_redacts(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("hanzo_hub.test_vault")
    logger.addFilter(RedactingFilter(Redactor({"TOKEN": "tok-123456"})))
    with caplog.at_level(logging.INFO, logger="hanzo_hub.test_vault"):
        logger.info("calling with %s", "tok-123456")
    assert "tok-123456" not in caplog.text
    assert "[redacted:TOKEN]" in caplog.text


def _set_many(directory: str, prefix: str, count: int) -> None:
    vault = Vault(Path(directory), keyring_service=None)
    for i in range(count):
        vault.set(f"{prefix}{i}", f"value-{prefix}-{i}")


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    """Two processes setting secrets at once (a hub saving refreshed OAuth tokens while `secrets set` runs): every
    write survives, because each read-modify-write holds the vault's lock."""
    import multiprocessing

    Vault(tmp_path / "v", keyring_service=None).set("seed", "value-seed")  # the key exists before they race
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_set_many, args=(str(tmp_path / "v"), p, 40)) for p in ("a", "b")]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
        assert writer.exitcode == 0
    vault = Vault(tmp_path / "v", keyring_service=None)
    assert len(vault.list()) == 81
    assert vault.get("b39") == "value-b-39"
