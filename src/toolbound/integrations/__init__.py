"""Drop-in integrations: toolbound under the agent frameworks people already use.

Each module needs its framework, installed through an extra:
``toolbound[agents]`` (OpenAI Agents SDK), ``toolbound[pydantic-ai]`` (Pydantic AI) and
``toolbound[langgraph]`` (LangGraph / LangChain).
"""
