"""The eval's peer: one task through browser-use, the way its users run it, as JSON on stdout.

Usage: peer.py TASK URL PROVIDER MODEL BASE_URL MAX_STEPS TIMEOUT_SECONDS PROFILE_DIR
               MAX_ANSWER_TOKENS MODEL_TIMEOUT_SECONDS
PROVIDER is openai (BASE_URL any OpenAI-compatible server, or empty for OpenAI with
OPENAI_API_KEY) or anthropic (ANTHROPIC_API_KEY).
browser-use drives the host's Chromium headless through CDP with its own defaults, except what
this model cannot do or what would be billed beside the task: no screenshots (the model reads
text only), no judge (a second opinion costs tokens the task did not need), and the same limits
per model call as Airlock's (answer tokens, and seconds: its own default for an unknown model is
75, too short for a cold prompt on a small machine).
"""

import asyncio
import json
import os
import sys
import time

os.environ.setdefault("ANONYMIZED_TELEMETRY", "false")
os.environ.setdefault("BROWSER_USE_CLOUD_SYNC", "false")
os.environ.setdefault("BROWSER_USE_LOGGING_LEVEL", "warning")

from browser_use import Agent, BrowserProfile, BrowserSession  # noqa: E402


async def main():
    task, url, provider, model, base_url, max_steps, timeout, profile = sys.argv[1:9]
    max_answer_tokens, model_timeout = int(sys.argv[9]), float(sys.argv[10])
    if provider == "anthropic":
        from browser_use.llm.anthropic.chat import ChatAnthropic
        llm = ChatAnthropic(model=model, temperature=0.0, max_retries=0,
                            max_tokens=max_answer_tokens)
    else:
        from browser_use.llm.openai.chat import ChatOpenAI
        llm = ChatOpenAI(model=model, base_url=base_url or None, temperature=0.0, max_retries=0,
                         api_key=os.environ.get("OPENAI_API_KEY") or "not-needed",
                         max_completion_tokens=max_answer_tokens, timeout=model_timeout)
    browser = BrowserSession(browser_profile=BrowserProfile(
        executable_path="/usr/bin/chromium", headless=True, chromium_sandbox=False,
        user_data_dir=profile, keep_alive=False))
    agent = Agent(task=f"{task}\nStart at: {url}", llm=llm, browser_session=browser,
                  use_vision=False, use_judge=False, enable_signal_handler=False,
                  llm_timeout=int(model_timeout))
    started = time.monotonic()
    timed_out = False
    try:
        history = await asyncio.wait_for(agent.run(max_steps=int(max_steps)), float(timeout))
    except asyncio.TimeoutError:
        timed_out = True
        history = agent.history
    finally:
        try:
            await browser.kill()
        except Exception:  # the browser is already gone
            pass
    calls = agent.token_cost_service.usage_history
    steps = history.history
    result = {
        "wall_ms": int((time.monotonic() - started) * 1000),
        "timed_out": timed_out,
        "steps": len(steps),
        "done": history.is_done(),
        "model_calls": len(calls),
        "prompt_tokens": sum(c.usage.prompt_tokens for c in calls),
        "cached_tokens": sum(c.usage.prompt_cached_tokens or 0 for c in calls),
        "completion_tokens": sum(c.usage.completion_tokens for c in calls),
        "first_prompt_tokens": calls[0].usage.prompt_tokens if calls else 0,
        # A step without model output is one whose answer browser-use could not read as actions.
        "steps_without_valid_output": sum(1 for s in steps if s.model_output is None),
        "action_errors": sum(1 for s in steps for r in s.result if r.error),
        "final": (history.final_result() or "")[:2000],
        "errors": [e[:300] for e in history.errors() if e][:5],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
