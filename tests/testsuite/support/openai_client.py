"""Speak to an OpenAI-compatible endpoint with the `openai` package, as a program would.

Usage: openai_client.py BASE_URL API_KEY MAX_TOKENS MODEL... -- UNKNOWN_MODEL

Prints one JSON object: for each MODEL the pieces of a streamed chat completion and of a streamed
completion (greedy, a fixed length), and what the client raised for UNKNOWN_MODEL (its class,
status and message).
"""

import json
import sys

import openai

PROMPT = "Once upon a time"
CHAT = [{"role": "user", "content": "Tell me a story."}]


def main():
    base_url, api_key, max_tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
    split = sys.argv.index("--")
    models, unknown = sys.argv[4:split], sys.argv[split + 1]
    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=120)
    greedy = {"max_tokens": max_tokens, "temperature": 0, "seed": 0, "extra_body": {"ignore_eos": True}}
    result = {"models": {}, "listed": [model.id for model in client.models.list()]}
    for model in models:
        chat = client.chat.completions.create(model=model, messages=CHAT, stream=True, **greedy)
        completion = client.completions.create(model=model, prompt=PROMPT, stream=True, **greedy)
        result["models"][model] = {
            "chat": [chunk.choices[0].delta.content for chunk in chat if chunk.choices],
            "completion": [chunk.choices[0].text for chunk in completion if chunk.choices],
        }
    try:
        client.completions.create(model=unknown, prompt=PROMPT, max_tokens=1)
        result["unknown"] = None
    except openai.APIStatusError as error:
        result["unknown"] = {"class": type(error).__name__, "status": error.status_code, "message": error.message,
                             "code": error.code, "type": error.type, "param": error.param}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
