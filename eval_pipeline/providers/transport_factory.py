"""Which transport sends a config's calls, and opening one.

Apart from the contract (:mod:`~eval_pipeline.providers.transport`) so that the contract
imports no implementation: each transport imports the contract, and only this factory
names them, importing the one asked for when a client is opened (the SDKs and aiohttp cost
seconds to import, and a process that never calls a model should not pay for them).
"""

from __future__ import annotations

from typing import Literal

from eval_pipeline.errors import ConfigError
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.transport import Transport

TransportKind = Literal["aiohttp", "sdk"]


def transport_kind(config: ModelConfig) -> TransportKind:
    """Which transport sends the config's calls: plain aiohttp for OpenAI-compatible
    servers (the SDK more than doubles a call's CPU and adds nothing such a server
    needs), the official SDK for OpenAI and Anthropic themselves (their auth, versioning
    headers and error mapping are the SDKs' to keep right)."""
    return "aiohttp" if config.api == "openai_compatible" else "sdk"


def make_transport(
    config: ModelConfig, api_key: str, base_url: str | None, kind: TransportKind | None = None
) -> Transport:
    """The transport for the config (`kind` overrides `transport_kind`, for comparisons).

    The SDKs and aiohttp are imported only here, so that importing the package does not
    pay for them.
    """
    kind = kind or transport_kind(config)
    if kind == "aiohttp":
        if config.api == "anthropic_messages":
            raise ConfigError(f"model {config.name}: the aiohttp transport speaks OpenAI only")
        from eval_pipeline.providers import aiohttp_transport

        return aiohttp_transport.OpenAICompatibleTransport(config, api_key, base_url)
    from eval_pipeline.providers import sdk_transport

    if config.api == "anthropic_messages":
        return sdk_transport.AnthropicTransport(config, api_key, base_url)
    return sdk_transport.OpenAITransport(config, api_key, base_url)
