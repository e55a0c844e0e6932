"""Encryption at rest (credentials.crypto): Fernet through MultiFernet, key rotation, values bound to
their row. Pure: no database."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from credentials.crypto import BadKeyError, DecryptError, Keyring, derived_key, parse_keys

OLD = Fernet.generate_key().decode()
NEW = Fernet.generate_key().decode()


def test_a_sealed_value_opens_with_its_owner_and_name_and_holds_no_plain_text():
    # given
    ring = Keyring([OLD])

    # when
    token = ring.seal(owner_id=7, name="hf", values={"token": "hf_secret_value"})

    # then
    assert "hf_secret_value" not in token
    assert ring.open(token, owner_id=7, name="hf") == {"token": "hf_secret_value"}


def test_a_sealed_value_copied_to_another_row_does_not_open():
    # given
    ring = Keyring([OLD])
    token = ring.seal(owner_id=7, name="hf", values={"token": "x"})

    # when / then
    with pytest.raises(DecryptError, match="belongs to another credential"):
        ring.open(token, owner_id=8, name="hf")
    with pytest.raises(DecryptError, match="belongs to another credential"):
        ring.open(token, owner_id=7, name="other")


def test_rotation_the_new_key_first_reads_old_values_and_rotate_rewrites_them_for_the_new_key_alone():
    # given
    old_token = Keyring([OLD]).seal(owner_id=1, name="s3", values={"access_key": "k"})
    both = Keyring([NEW, OLD])

    # when
    rotated = both.rotate(old_token)

    # then
    assert both.open(old_token, owner_id=1, name="s3") == {"access_key": "k"}
    assert Keyring([NEW]).open(rotated, owner_id=1, name="s3") == {"access_key": "k"}
    with pytest.raises(DecryptError, match="cannot be decrypted"):
        Keyring([NEW]).open(old_token, owner_id=1, name="s3")


def test_a_bad_key_is_refused_naming_its_position():
    # when / then
    with pytest.raises(BadKeyError, match="item 2 is not a Fernet key"):
        parse_keys([OLD, "not-a-key"])
    with pytest.raises(BadKeyError, match="is empty"):
        parse_keys([])


def test_the_derived_key_is_a_fernet_key_fixed_by_the_secret():
    # when
    first, again, other = derived_key("s1"), derived_key("s1"), derived_key("s2")

    # then
    assert first == again
    assert first != other
    assert len(parse_keys([first])) == 1
