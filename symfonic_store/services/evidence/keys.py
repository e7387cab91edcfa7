"""Ed25519 keys for checkpoints and archives: load, make, sign, check a signature.

The key that signs never reaches the database; a verifier needs only the public key
(several, by their id, when keys rotated).
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import InvalidInputError
from ...events import canonical_json

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

PrivateKeyLike = Any
"""An ``Ed25519PrivateKey``, its PEM (``bytes``), or the path of its PEM file."""
PublicKeyLike = Any
"""An ``Ed25519PublicKey``, its PEM (``bytes``), or the path of its PEM file."""


def _read(source: Any, what: str) -> bytes:
    if isinstance(source, bytes):
        return source
    if isinstance(source, str | os.PathLike):
        try:
            return Path(source).read_bytes()
        except OSError as exc:
            raise InvalidInputError(what, f"cannot read {str(source)!r}: {exc.strerror}") from None
    raise InvalidInputError(what, f"must be a key, PEM bytes or a path, got {type(source).__name__}")


# The twin of load_public_key, deliberately (see the comment there).
def load_private_key(source: PrivateKeyLike) -> Ed25519PrivateKey:
    """The Ed25519 private key ``source`` is, holds (PEM bytes) or names (a path).

    Raises:
        InvalidInputError: it is not readable, not PEM, or not an Ed25519 private key.
    """
    # Imported when a key is used: `import symfonic_store` and `--help` do not pay for it.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    if isinstance(source, ed25519.Ed25519PrivateKey):
        return source
    data = _read(source, "key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(
            "key", f"is not an unencrypted PEM private key ({exc}); make one with `symfonic-store keygen`"
        ) from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise InvalidInputError("key", "is not an Ed25519 key; make one with `symfonic-store keygen`")
    return key


# The twin of load_private_key, deliberately: the two differ in the key type, the PEM
# loader and the advice given, all a shared helper would take as parameters.
def load_public_key(source: PublicKeyLike) -> Ed25519PublicKey:
    """The Ed25519 public key ``source`` is, holds (PEM bytes) or names (a path).

    Raises:
        InvalidInputError: it is not readable, not PEM, or not an Ed25519 public key.
    """
    # Imported when a key is used: `import symfonic_store` and `--help` do not pay for it.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    if isinstance(source, ed25519.Ed25519PublicKey):
        return source
    data = _read(source, "public key")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(
            "public key", f"is not a PEM public key ({exc}); use the KEY.pub that keygen wrote"
        ) from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise InvalidInputError("public key", "is not an Ed25519 public key")
    return key


def key_id(public_key: Ed25519PublicKey) -> str:
    """SHA-256 (hex) of the raw 32-byte Ed25519 public key."""
    from cryptography.hazmat.primitives import serialization

    raw = public_key.public_bytes(
        encoding=serialization.Encoding.Raw, format=serialization.PublicFormat.Raw
    )
    return hashlib.sha256(raw).hexdigest()


def generate_key(out: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write a new Ed25519 key pair: ``out`` (private, PEM, mode 0600) and ``out.pub``.

    Never overwrites: both files are created exclusively.

    Raises:
        InvalidInputError: either file exists, or the folder is not writable.
    """
    # Imported when a key is used: `import symfonic_store` and `--help` do not pay for it.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    private_path = Path(out)
    public_path = private_path.with_name(private_path.name + ".pub")
    for path in (private_path, public_path):
        if path.exists() or path.is_symlink():
            raise InvalidInputError(
                "--out", f"{str(path)!r} exists: keygen never overwrites a key; choose another name"
            )
    key = ed25519.Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PrivateFormat.PKCS8,
        encryption_algorithm=serialization.NoEncryption(),
    )
    public_pem = key.public_key().public_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PublicFormat.SubjectPublicKeyInfo,
    )
    written: list[Path] = []
    try:
        for path, data, mode in ((private_path, private_pem, 0o600), (public_path, public_pem, 0o644)):
            # O_EXCL: a file that appeared since the check above is not overwritten either.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            written.append(path)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(path, mode)  # the umask may have narrowed it; never widen the private key
    except OSError as exc:
        for path in written:
            path.unlink(missing_ok=True)
        raise InvalidInputError("--out", f"cannot write {str(exc.filename)!r}: {exc.strerror}") from None
    return private_path, public_path


def sign(document: Mapping[str, Any], key: Ed25519PrivateKey) -> str:
    """Base64 Ed25519 signature of the canonical JSON of ``document``."""
    return base64.b64encode(key.sign(canonical_json(dict(document)).encode("utf-8"))).decode("ascii")


def signature_holds(document: Mapping[str, Any], signature: str, key: Ed25519PublicKey) -> bool:
    """Does ``signature`` sign the canonical JSON of ``document`` under ``key``?"""
    from cryptography.exceptions import InvalidSignature

    try:
        raw = base64.b64decode(signature, validate=True)
        key.verify(raw, canonical_json(dict(document)).encode("utf-8"))
    except (InvalidSignature, ValueError):
        return False
    return True


def keys_by_id(public_keys: Iterable[PublicKeyLike]) -> dict[str, Ed25519PublicKey]:
    """The given public keys (several when keys rotated) by their key id."""
    loaded = [load_public_key(k) for k in public_keys]
    return {key_id(k): k for k in loaded}
