"""Model configs (`configs/models/*.yaml`), validated by pydantic.

A config names the wire API, the provider, the wire model, the price-book entry and the
*name* of the environment variable that holds the key — never a key. Everything that
does not change the answer (timeouts, retries, in-flight limit, base URL) lives here too
and is kept out of the response cache key.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from eval_pipeline.config import load_yaml_config
from eval_pipeline.errors import ConfigError
from eval_pipeline.providers.errors import MissingApiKeyError
from eval_pipeline.records import FrozenRecord

SIMULATED = "simulated"
"""The provider name of the project's simulated provider (`eval_pipeline.sim`)."""

NO_KEY_PLACEHOLDER = "no-key-configured"
"""Sent to keyless OpenAI-compatible servers (the SDK requires a non-empty string)."""

Api = Literal["anthropic_messages", "openai_chat", "openai_compatible"]


NOT_IN_IDENTITY = {
    "context_window_tokens",
    "max_reply_bytes",
    "api_key_optional",
    "max_in_flight",
    "connections_per_client",
}
"""Model config fields that change no kept result, left out of a run's identity and an
experiment's registered material, so nothing kept is redone or refused: a dry run's bound,
the reply size cap (a reply past it is an infrastructure error, ‡, which is never scored
and is re-run by the next run, so no kept result depends on the cap), and how many calls
are in flight over how many connections (how fast, not what: a reply depends on its
request and seed; more 429s under a higher limit are retried, or end as ‡)."""

DEFAULT_MAX_REPLY_BYTES = 4 * 1024 * 1024
"""4 MiB. The largest legitimate reply is its output limit times the bytes a token can
take in the body, plus a few hundred bytes of framing: 128k output tokens (above any
shipped or hosted model's limit today: Claude Sonnet 4.5 64k, GPT-4.1 32k) at 32 bytes a
token (a token of two astral characters JSON-escaped as surrogate pairs is 24 bytes; the
usual English token is 4) fits; 64 replies in flight at the cap hold 256 MiB. A config
that asks for more in a reply (logprobs, several choices) raises it."""


class RetryPolicy(FrozenRecord):
    """Exponential backoff with jitter, honouring Retry-After, bounded in count and time.

    Attempt n (n >= 1) that failed with a retryable cause waits
    `max(retry_after, min(max_delay_s, base_delay_s * multiplier**(n-1)) * U(1-jitter, 1))`;
    no retry starts once `max_total_s` since the first attempt would be passed.
    """

    max_attempts: int = Field(default=4, ge=1, le=20)
    base_delay_s: float = Field(default=0.5, ge=0)
    multiplier: float = Field(default=2.0, ge=1)
    max_delay_s: float = Field(default=30.0, ge=0)
    max_total_s: float = Field(default=120.0, gt=0)
    jitter: float = Field(default=0.5, ge=0, le=1)


class ModelConfig(FrozenRecord):
    """One model as the pipeline calls it."""

    name: str = Field(min_length=1, description="config name; a model partition key")
    api: Api
    provider: str = Field(
        min_length=1,
        description="provider identity (e.g. anthropic, openai, vllm-local, simulated); "
        "part of the cache key, unlike the base URL",
    )
    model: str = Field(min_length=1, description="model name sent on the wire")
    price_model: str | None = Field(
        default=None, description="entry in configs/prices.yaml; default: `model`"
    )
    base_url: str | None = None
    base_url_env: str | None = Field(
        default=None, description="environment variable holding the base URL"
    )
    api_key_env: str | None = Field(
        default=None, description="name of the environment variable holding the key"
    )
    api_key_optional: bool = Field(
        default=False,
        description="an OpenAI-compatible server that may run without a key (a local one): "
        "the key is sent when `api_key_env` is set in the environment, else a placeholder",
    )
    seed_header: str | None = Field(
        default=None,
        description="header that carries the replicate seed (the simulated provider's "
        "`x-evalp-seed`), for wire formats without a seed field",
    )
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    max_in_flight: int = Field(default=16, ge=1, le=1024)
    connections_per_client: int = Field(
        default=8,
        ge=1,
        description="calls in flight per SDK client; more in flight uses more clients",
    )
    timeout_s: float = Field(
        default=120.0,
        gt=0,
        description="an attempt's total deadline: connecting, sending and reading the whole "
        "reply end within it however the bytes arrive (also the longest wait for one byte)",
    )
    connect_timeout_s: float = Field(default=10.0, gt=0)
    max_reply_bytes: int = Field(
        default=DEFAULT_MAX_REPLY_BYTES,
        ge=1024,
        description="the largest reply body read; a longer one is stopped while it is read "
        "and ends as an `oversize` drop with its first bytes kept",
    )
    input_token_overhead: int = Field(
        default=0,
        ge=0,
        description="tokens a provider adds that are not in the request bytes (e.g. a "
        "tool-use system prompt); added to the worst-case input bound",
    )
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    context_window_tokens: int | None = Field(
        default=None,
        gt=0,
        description="the model's input limit: the dry run's bound on one call's input once "
        "a conversation has grown (tool results are not capped); changes no result",
    )
    note: str | None = None

    @model_validator(mode="after")
    def _keys_for_hosted_apis(self) -> ModelConfig:
        if self.api in ("anthropic_messages", "openai_chat") and not self.api_key_env:
            raise ValueError(f"api {self.api} needs api_key_env (the variable's name)")
        if self.api_key_env and self.api_key_env.startswith(("sk-", "sk_")):
            raise ValueError("api_key_env names an environment variable; never put a key here")
        if self.api_key_optional and (self.api != "openai_compatible" or not self.api_key_env):
            raise ValueError(
                "api_key_optional is for an openai_compatible server with an api_key_env "
                "(the variable that holds its key when it checks one)"
            )
        return self

    @property
    def priced_as(self) -> str:
        """The model name looked up in the price book."""
        return self.price_model or self.model

    def resolve_base_url(self, override: str | None = None) -> str | None:
        """`override`, else the env variable named by `base_url_env`, else `base_url`."""
        if override:
            return override
        if self.base_url_env:
            value = os.environ.get(self.base_url_env)
            if not value:
                raise ConfigError(
                    f"model {self.name}: environment variable {self.base_url_env} "
                    "(base_url_env) is not set"
                )
            return value
        if self.api == "openai_compatible" and not self.base_url:
            raise ConfigError(f"model {self.name}: openai_compatible needs base_url")
        return self.base_url

    def required_key_env(self) -> str | None:
        """The environment variable that must hold a key for this config (None: none is
        needed, the server runs without one)."""
        return None if self.api_key_optional else self.api_key_env

    def resolve_api_key(self) -> str:
        """The key from the environment variable the config names; never from a file."""
        if not self.api_key_env:
            return NO_KEY_PLACEHOLDER
        value = os.environ.get(self.api_key_env)
        if not value and self.required_key_env() is None:
            return NO_KEY_PLACEHOLDER
        if not value:
            raise MissingApiKeyError(
                f"model {self.name}: environment variable {self.api_key_env} is not set"
            )
        return value


def load_model_config(path: Path) -> ModelConfig:
    """One model config file, validated; errors name the file and field."""
    return load_yaml_config(ModelConfig, path)


@dataclass(frozen=True)
class ModelConfigScan:
    """Every model config file of the config folders: the valid ones by name, the invalid
    ones by file with the reason. A job takes the configs it uses (`require`) and reports the
    invalid files it skipped (`skipped`): a typo in a config nothing uses is shown, but
    does not stop a run that never needed it."""

    directories: tuple[Path, ...]
    configs: Mapping[str, ModelConfig]
    invalid: Mapping[Path, str]

    @property
    def where(self) -> str:
        return " + ".join(str(directory) for directory in self.directories)

    def require(self, names: Iterable[str]) -> dict[str, ModelConfig]:
        """The configs called `names`; a missing one is an error naming the invalid files
        (one of them is likely the config meant)."""
        wanted = list(names)
        missing = [name for name in wanted if name not in self.configs]
        if missing:
            listed = ", ".join(repr(name) for name in missing)
            if self.invalid:
                path, reason = next(iter(self.invalid.items()))
                raise ConfigError(
                    f"model config {listed} needed but not loaded: {reason}"
                    if len(self.invalid) == 1
                    else f"model config {listed} needed but not loaded; "
                    f"{len(self.invalid)} files in {self.where} are invalid, "
                    f"first {path}: {reason}"
                )
            known = ", ".join(sorted(self.configs)) or "none"
            raise ConfigError(f"model config {listed} not found in {self.where}; known: {known}")
        return {name: self.configs[name] for name in wanted}

    def all_valid(self) -> dict[str, ModelConfig]:
        """Every config by name, when every file is valid (else the first file's error)."""
        for reason in self.invalid.values():
            raise ConfigError(reason)
        return dict(self.configs)

    def skipped(self) -> list[str]:
        """One line per invalid file: what was skipped and why."""
        return [
            f"skipped invalid model config {path} (this job does not use it): "
            + " ".join(reason.split())
            for path, reason in self.invalid.items()
        ]


def scan_model_config_folders(roots: Sequence[Path]) -> ModelConfigScan:
    """Every `*.yaml` of the folders `roots` (a file of a later folder replaces an earlier
    one of the same file name); invalid files are kept with their error. Two valid files
    with one config name are an error (which one was meant is unknown). Which folders are
    the project's is `project_configs.scan_model_configs`' to say, not this layer's."""
    roots = tuple(roots)
    files = {path.name: path for root in roots for path in sorted(root.glob("*.yaml"))}
    configs: dict[str, ModelConfig] = {}
    invalid: dict[Path, str] = {}
    for path in sorted(files.values(), key=lambda found: found.name):
        try:
            config = load_model_config(path)
        except ConfigError as error:
            invalid[path] = str(error)
            continue
        if config.name in configs:
            raise ConfigError(f"model config name {config.name!r} is used twice (in {path})")
        configs[config.name] = config
    return ModelConfigScan(directories=roots, configs=configs, invalid=invalid)


def load_model_configs(directory: Path) -> dict[str, ModelConfig]:
    """Every model config of the folder by name; any invalid file is an error (use
    `scan_model_config_folders` to go on without the invalid ones)."""
    return scan_model_config_folders([directory]).all_valid()


def configured_keys(configs: Iterable[ModelConfig]) -> list[str]:
    """The keys the environment holds for `configs` (each whose key variable is set):
    what a session redacts from its start, whichever of its clients a reply comes from."""
    keys: dict[str, None] = {}
    for config in configs:
        value = os.environ.get(config.api_key_env) if config.api_key_env else None
        if value:
            keys[value] = None
    return list(keys)
