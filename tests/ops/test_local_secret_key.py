"""The embedded default's secret key (docs/operations.md "Secrets"): random per installation, made on
the first start in the data folder and kept there, never the fixed key the repository printed; the
credentials stored under the key derived from that fixed key stay readable and move to the new one."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import override_settings

from credentials.crypto import LEGACY_LOCAL_SECRET_KEY, DecryptError, Keyring, derived_key, local_keys
from credentials.models import Credential
from credentials.services import credentials_rotate, keyring
from osmo.secret_file import SecretFileError, secret_key_load_or_create, secret_key_path

ROOT = Path(__file__).resolve().parents[2]
PRINT_KEYS = ("from django.conf import settings; print(settings.SECRET_KEY); "
              "print(','.join(settings.OSMO_CREDENTIALS_KEYS))")


def _local_settings(data_dir: Path) -> tuple[str, list[str]]:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SECRET_KEY", "SECRET_KEY", "OSMO_CREDENTIALS_KEYS")}
    env |= {"DJANGO_SETTINGS_MODULE": "osmo.settings.local", "OSMO_DATA_DIR": str(data_dir)}
    result = subprocess.run([sys.executable, "-c", PRINT_KEYS], env=env, cwd=ROOT, capture_output=True, text=True,
                            timeout=60, check=True)
    key, credential_keys = result.stdout.splitlines()
    return key, credential_keys.split(",")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_local_settings_make_a_random_key_in_the_data_folder_and_keep_it(tmp_path):
    """docs/operations.md "Secrets": `make run` used the fixed "django-insecure-local-only-do-not-deploy",
    so anyone could forge its task tokens and read its credentials' key from the repository."""
    # when the local settings start twice on one data folder, and once on another
    first, credential_keys = _local_settings(tmp_path / "a")
    again, _ = _local_settings(tmp_path / "a")
    elsewhere, _ = _local_settings(tmp_path / "b")

    # then the key is random, kept in the data folder (only its owner may read it), and the same at each start
    assert first != LEGACY_LOCAL_SECRET_KEY
    assert len(first) >= 80
    assert again == first
    assert elsewhere != first
    path = secret_key_path(tmp_path / "a")
    assert path.read_text() == first + "\n"
    assert (_mode(path), _mode(path.parent)) == (0o600, 0o700)
    # and the credential store encrypts with a key derived from it, the fixed key's only decrypts
    assert credential_keys == [derived_key(first), derived_key(LEGACY_LOCAL_SECRET_KEY)]


def test_processes_starting_at_once_agree_on_one_key(tmp_path):
    # given eight processes (web, worker, beat, ... of one `make run`) that find no key yet
    script = "import sys; from pathlib import Path; from osmo.secret_file import secret_key_load_or_create as f; " \
             "print(f(Path(sys.argv[1])))"
    processes = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                                  text=True) for _ in range(8)]

    # when they all start
    keys = {process.communicate(timeout=60)[0].strip() for process in processes}

    # then each read the one key written, and no temporary file is left
    assert keys == {secret_key_path(tmp_path).read_text().strip()}
    assert [path.name for path in secret_key_path(tmp_path).parent.iterdir()] == ["secret_key"]


def test_a_key_file_opened_up_is_tightened_and_an_empty_one_refused(tmp_path):
    # given a key file and its folder readable by everyone (a copy, an umask)
    key = secret_key_load_or_create(tmp_path)
    path = secret_key_path(tmp_path)
    path.chmod(0o644)
    path.parent.chmod(0o755)

    # when it is read again
    assert secret_key_load_or_create(tmp_path) == key

    # then only its owner may read it again
    assert (_mode(path), _mode(path.parent)) == (0o600, 0o700)
    # and an emptied file is refused rather than used as a key
    path.write_text("\n")
    with pytest.raises(SecretFileError, match="holds no secret key"):
        secret_key_load_or_create(tmp_path)
    assert path.read_text() == "\n"


@pytest.mark.django_db
def test_credentials_stored_under_the_fixed_key_open_after_the_upgrade_and_move_to_the_new_key(user):
    """docs/operations.md "Secrets": a credential `make run` stored before the upgrade was sealed with
    the key derived from the fixed secret key; it must open with the generated key's settings, and
    credentials_rotate (run by `make run` at start) seals it with the new key alone."""
    # given a credential sealed with the key derived from the fixed key
    sealed = Keyring([derived_key(LEGACY_LOCAL_SECRET_KEY)]).seal(owner_id=user.pk, name="hf", values={"token": "v1"})
    Credential.objects.create(owner=user, name="hf", kind="generic", keys=["token"], sealed=sealed)
    new_secret = "generated-" + "x" * 80

    # when the upgraded local settings read it, then rotate
    with override_settings(OSMO_CREDENTIALS_KEYS=local_keys(new_secret)):
        before = keyring().open(Credential.objects.get().sealed, owner_id=user.pk, name="hf")
        rotated = credentials_rotate()

    # then it opened, and now opens with the new key alone (and no longer with the fixed one's)
    assert before == {"token": "v1"}
    assert rotated == 1
    stored = Credential.objects.get().sealed
    assert stored != sealed
    assert Keyring([derived_key(new_secret)]).open(stored, owner_id=user.pk, name="hf") == {"token": "v1"}
    with pytest.raises(DecryptError, match="cannot be decrypted"):
        Keyring([derived_key(LEGACY_LOCAL_SECRET_KEY)]).open(stored, owner_id=user.pk, name="hf")


FORGE = """
import django
django.setup()
from django.core import signing
from workflows.scheduling.pod.runtime import API_TOKEN_SALT, TOKEN_SALT, task_token, task_token_read
from credentials.crypto import LEGACY_LOCAL_SECRET_KEY
for salt in (TOKEN_SALT, API_TOKEN_SALT):
    forged = signing.dumps({"task": 1, "pod": "train-1-u1-train-0"}, key=LEGACY_LOCAL_SECRET_KEY, salt=salt,
                           compress=True)
    own = task_token(1, "train-1-u1-train-0", salt=salt)
    print(task_token_read(forged, salt=salt), task_token_read(own, salt=salt))
"""


def test_a_task_token_forged_with_the_repositorys_old_key_is_refused_by_make_runs_settings(tmp_path):
    """docs/operations.md "Secrets": the fixed key let anyone compute a signed task token for any running
    task (pod names follow from workflow and task names, task ids are sequential); one authenticated as
    the admin and cancelled the admin's workflow. Under the embedded default's settings a token signed
    with that key (for the barrier and for the task's `osmo` command) is no token, and one the service
    signs itself still is."""
    # given the embedded default's settings in a fresh data folder
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SECRET_KEY", "SECRET_KEY", "OSMO_CREDENTIALS_KEYS")}
    env |= {"DJANGO_SETTINGS_MODULE": "osmo.settings.local", "OSMO_DATA_DIR": str(tmp_path / "data")}

    # when both tokens are read back
    result = subprocess.run([sys.executable, "-c", FORGE], env=env, cwd=ROOT, capture_output=True, text=True,
                            timeout=60, check=True)

    # then
    assert result.stdout.splitlines() == ["None (1, 'train-1-u1-train-0')"] * 2
