"""The simulated LLM provider: a real HTTP server on loopback speaking the OpenAI Chat
Completions and Anthropic Messages wire formats, with deterministic behaviour profiles.

See ``docs/sim-contract.md``. Entry points: ``python -m eval_pipeline.sim``,
:func:`eval_pipeline.sim.server.serve`, :func:`eval_pipeline.sim.process.running_sim`.
"""

SIM_API_KEY = "simulated-provider-accepts-any-key"
"""The key clients send the simulated provider: a placeholder, not a secret (the server
ignores keys). Here, in a module that imports nothing, so the definitions can name it."""
