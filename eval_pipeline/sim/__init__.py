"""The simulated LLM provider: a real HTTP server on loopback speaking the OpenAI Chat
Completions and Anthropic Messages wire formats, with deterministic behaviour profiles.

See ``docs/sim-contract.md``. Entry points: ``python -m eval_pipeline.sim``,
:func:`eval_pipeline.sim.server.serve`, :func:`eval_pipeline.sim.process.running_sim`.
"""
