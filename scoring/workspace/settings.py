"""The workspace's settings: what the operator of a server configured, in a file beside the
database (``<db>.d/settings.toml``), never through the app.

Keys (all optional):

- ``score_table_roots``: a list of folders (local paths or URLs of the engine's protocols).
  The Score tables page of a team-mode server opens only score tables found under them, and
  replays a table's trajectory only from a source under the same root; nobody types a location.
- ``storage_profiles``: how the app reaches a score table in object storage, by URL prefix,
  never with a credential in the file (docs/fleet.md, "Opening a table in the app")::

      [storage_profiles.lab]
      prefix = "s3://evals/"                        # or prefixes = [...]: the URLs it applies to
      options = { endpoint_url = "https://s3.internal:9000" }   # fsspec options, no secrets
      aws_profile = "lab-readonly"                  # credentials from the server user's ~/.aws
      env = { key = "LAB_S3_KEY_ID", secret = "LAB_S3_SECRET" } # option <- environment variable

  A table's location takes the profile with the longest matching prefix; the credentials are
  read from the server's environment (or its AWS profile) when the table is opened. An option
  that names a credential (key, secret, token, password...) in ``options`` is refused.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..files import read_regular

SETTINGS_FILE = "settings.toml"
MAX_SETTINGS_BYTES = 64 * 1024


CREDENTIAL = re.compile(r"^(key|token|secret|password|passwd|sas|credentials?)$|secret|password|token|credential|"
                        r"access_key|account_key|sas_token|connection_string|private_key", re.IGNORECASE)
"""An option name that holds a credential: refused in a profile's ``options`` (name an
environment variable in ``env``, or an AWS profile, instead)."""
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PROFILE_KEYS = frozenset({"prefix", "prefixes", "options", "aws_profile", "env"})


@dataclass(frozen=True, slots=True)
class StorageProfile:
    """How the app reaches the locations under ``prefixes`` (no credential in it)."""

    name: str
    prefixes: tuple[str, ...]
    options: str = "{}"
    """The fsspec options (JSON text: the profile stays hashable), none a credential."""
    aws_profile: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    """(option, environment variable): the option's value is the variable's, read when used."""

    def matches(self, location: str) -> int:
        """The length of the longest prefix of ``location`` this profile covers (0: none)."""
        return max((len(p) for p in self.prefixes if location.startswith(p)), default=0)

    def storage_options(self, environ: Mapping[str, str] | None = None) -> dict:
        """The options to open a location with: the profile's, its AWS profile (s3fs's
        ``profile``) and each ``env`` variable's value. InputError naming the variable (never a
        value) when one is not set."""
        environ = os.environ if environ is None else environ
        out = json.loads(self.options)
        if self.aws_profile:
            out["profile"] = self.aws_profile
        missing = [var for _opt, var in self.env if not environ.get(var)]
        if missing:
            raise InputError(f"storage profile {self.name!r}: the server's environment does not set "
                             f"{', '.join(missing)} (the profile names the variables that hold its credentials)",
                             source=self.name)
        out.update({opt: environ[var] for opt, var in self.env})
        return out


@dataclass(frozen=True, slots=True)
class Settings:
    score_table_roots: tuple[str, ...] = ()
    storage_profiles: tuple[StorageProfile, ...] = ()

    def profile_for(self, location: str) -> StorageProfile | None:
        """The profile with the longest prefix of ``location`` (None: no profile covers it)."""
        best = max(self.storage_profiles, key=lambda p: p.matches(location), default=None)
        return best if best is not None and best.matches(location) else None


def settings_path(db: str | Path) -> Path:
    db = Path(db)
    return db.with_name(db.name + ".d") / SETTINGS_FILE


def read_settings(db: str | Path) -> Settings:
    """The workspace's settings (defaults when it has no settings file); InputError naming the
    file for one that is not TOML, is too large, or holds a key of the wrong type."""
    path = settings_path(db)
    if not path.exists():
        return Settings()
    data = read_regular(path)  # a FIFO or device is refused before reading
    if len(data) > MAX_SETTINGS_BYTES:
        raise InputError(f"larger than {MAX_SETTINGS_BYTES // 1024} KiB: not a settings file", source=str(path))
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"not TOML: {exc}", source=str(path)) from exc
    roots = doc.get("score_table_roots", [])
    if not isinstance(roots, list) or not all(isinstance(r, str) and r.strip() for r in roots):
        raise InputError("score_table_roots must be a list of folders (strings)", source=str(path))
    profiles = doc.get("storage_profiles", {})
    if not isinstance(profiles, dict):
        raise InputError("storage_profiles must be a table of profiles ([storage_profiles.NAME])", source=str(path))
    return Settings(score_table_roots=tuple(r.strip() for r in roots),
                    storage_profiles=tuple(_profile(name, p, str(path)) for name, p in sorted(profiles.items())))


def _credentials_in(options: Mapping, where: str) -> list[str]:
    """The dotted names of options (nested mappings included) that name a credential."""
    found = []
    for k, v in options.items():
        if CREDENTIAL.search(str(k)):
            found.append(f"{where}.{k}")
        if isinstance(v, Mapping):
            found += _credentials_in(v, f"{where}.{k}")
    return found


def _profile(name: str, doc: object, source: str) -> StorageProfile:
    """One ``[storage_profiles.NAME]`` table, checked: InputError naming the key at fault."""
    at = f"storage_profiles.{name}"
    if not isinstance(doc, dict):
        raise InputError(f"{at} must be a table (prefix, options, aws_profile, env)", source=source)
    unknown = sorted(set(doc) - _PROFILE_KEYS)
    if unknown:
        raise InputError(f"{at}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_PROFILE_KEYS))})",
                         source=source)
    prefixes = doc.get("prefixes", [doc["prefix"]] if "prefix" in doc else [])
    if not prefixes or not isinstance(prefixes, list) or not all(isinstance(p, str) and p.strip() for p in prefixes):
        raise InputError(f"{at}: give prefix (or prefixes): the locations the profile applies to", source=source)
    options = doc.get("options", {})
    if not isinstance(options, dict):
        raise InputError(f"{at}.options must be a table of fsspec options", source=source)
    secrets = _credentials_in(options, f"{at}.options")
    if secrets:
        raise InputError(f"{secrets[0]}: a credential is never stored in the workspace; name the environment "
                         f"variable that holds it (env = {{ key = \"VAR\" }}) or an AWS profile (aws_profile)",
                         source=source)
    aws = doc.get("aws_profile")
    if aws is not None and not (isinstance(aws, str) and aws.strip()):
        raise InputError(f"{at}.aws_profile must be the name of an AWS profile", source=source)
    env = doc.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) and _ENV_NAME.match(v) for v in env.values()):
        raise InputError(f"{at}.env must map option names to environment variable names (letters, digits, _)",
                         source=source)
    return StorageProfile(name, tuple(p.strip() for p in prefixes), json.dumps(options, sort_keys=True),
                          aws.strip() if aws else None, tuple(sorted(env.items())))
