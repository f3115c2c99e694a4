"""The local stack's data directory (dfdlocal.persist): its user's alone (directories 0700, files 0600), and what
it holds loaded back only when that user owns it and nobody else may write it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dfdlocal import persist, stspersist
from dfdlocal.stack import DATA_ENTRIES, DATA_PREFIXES


def _mode(path: Path) -> int:
    return path.lstat().st_mode & 0o777


def test_a_state_file_and_its_directories_are_written_private(tmp_path: Path) -> None:
    target = tmp_path / "data" / "s3" / "bucket" / "objects" / "k.pickle"
    persist.write_whole(target, b"tenant bytes")
    assert _mode(target) == 0o600
    assert {_mode(d) for d in (target.parent, target.parent.parent, tmp_path / "data" / "s3")} == {0o700}
    assert persist.read_state(target) == b"tenant bytes"


def test_an_earlier_world_readable_data_directory_is_made_private_and_other_files_are_left_alone(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    objects = data / persist.S3_DIR / "bucket" / "objects"
    objects.mkdir(parents=True, mode=0o755)
    (data / persist.S3_DIR).chmod(0o755)
    data.chmod(0o755)
    kept = [objects / "k.pickle", data / persist.SQS, data / "dynamodb" / "shared-local-instance.db"]
    kept.append(data / "stream-FilesTable.json")
    for path in kept:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"state")
        path.chmod(0o644)
    unknown = data / "notes.txt"  # not the stack's: a mistyped --data-dir changes nothing else
    unknown.write_text("mine")
    unknown.chmod(0o644)
    persist.secure_data_dir(data, DATA_ENTRIES, DATA_PREFIXES)
    assert {_mode(path) for path in kept} == {0o600}
    assert {_mode(d) for d in (data, data / persist.S3_DIR, objects, data / "dynamodb")} == {0o700}
    assert _mode(unknown) == 0o644


def test_a_new_data_directory_is_created_private(tmp_path: Path) -> None:
    data = tmp_path / "new" / "data"
    persist.secure_data_dir(data, DATA_ENTRIES, DATA_PREFIXES)
    assert _mode(data) == 0o700


@pytest.mark.parametrize("entry", [persist.SQS, stspersist.STS_SESSIONS, f"{persist.S3_DIR}/b/objects/k.pickle"])
def test_a_state_file_others_may_write_is_refused_naming_it(tmp_path: Path, entry: str) -> None:
    data = tmp_path / "data"
    path = data / entry
    persist.write_whole(path, b"state")
    path.chmod(0o664)
    with pytest.raises(persist.UnsafeStateError, match=f"{path}.*writable by its group or others \\(mode 0664\\)"):
        persist.secure_data_dir(data, DATA_ENTRIES, DATA_PREFIXES)
    with pytest.raises(persist.UnsafeStateError, match=str(path)):
        persist.read_state(path)
    path.chmod(0o600)
    persist.secure_data_dir(data, DATA_ENTRIES, DATA_PREFIXES)
    assert persist.read_state(path) == b"state"


def test_a_directory_others_may_write_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / persist.S3_DIR).mkdir(parents=True)
    (data / persist.S3_DIR).chmod(0o777)
    with pytest.raises(persist.UnsafeStateError, match=f"{data / persist.S3_DIR} is writable"):
        persist.secure_data_dir(data, DATA_ENTRIES, DATA_PREFIXES)
    data.chmod(0o757)
    with pytest.raises(persist.UnsafeStateError, match=f"{data} is writable"):
        persist.secure_data_dir(data, DATA_ENTRIES, DATA_PREFIXES)


def test_a_symbolic_link_in_place_of_a_state_file_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    elsewhere = tmp_path / "elsewhere.pickle"
    persist.write_whole(elsewhere, b"planted")
    data.mkdir()
    (data / persist.SQS).symlink_to(elsewhere)
    with pytest.raises(persist.UnsafeStateError, match="is a symbolic link"):
        persist.read_state(data / persist.SQS)
    with pytest.raises(persist.UnsafeStateError, match="is a symbolic link"):
        persist.secure_data_dir(data, DATA_ENTRIES, DATA_PREFIXES)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user takes root")
def test_a_state_file_another_user_owns_is_refused(tmp_path: Path) -> None:
    path = tmp_path / persist.SIGNING_KEY
    persist.write_whole(path, b"{}")
    os.chown(path, 4242, -1)
    with pytest.raises(persist.UnsafeStateError, match="is owned by uid 4242, not by this user"):
        persist.signing_key(tmp_path)


def test_the_stack_does_not_start_on_a_state_file_others_may_write(tmp_path: Path) -> None:
    from dfdlocal.stack import LocalStack, StackOptions, StartupError

    data = tmp_path / "data"
    persist.write_whole(data / persist.COGNITO, b"planted pickle")
    (data / persist.COGNITO).chmod(0o666)
    root = Path(__file__).resolve().parents[2]
    options = StackOptions(root=root, api_port=0, lambda_port=0, aws_port=0, data_dir=data)
    with pytest.raises(StartupError, match=f"{data / persist.COGNITO} is writable by its group or others"):
        LocalStack(options).start()
