"""Ask an OpenAI-compatible endpoint with several keys, as a program would, and say what the
`openai` package did with each: the completion's text, or the exception it raised.

Usage: openai_keys.py BASE_URL MODEL KEY...

Prints one JSON list, a KEY's entry each: {"text": ...} or {"class", "status", "code", "type",
"message", "retry_after"} (the answer's Retry-After header). No retries: every refusal shows.
"""

import json
import sys

import openai


def main():
    base_url, model, keys = sys.argv[1], sys.argv[2], sys.argv[3:]
    said = []
    for key in keys:
        client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=300)
        try:
            answer = client.completions.create(model=model, prompt="Once upon a time", max_tokens=4, temperature=0)
            said.append({"text": answer.choices[0].text})
        except openai.APIStatusError as error:
            said.append({"class": type(error).__name__, "status": error.status_code, "code": error.code,
                         "type": error.type, "message": error.message,
                         "retry_after": error.response.headers.get("retry-after")})
    print(json.dumps(said))


if __name__ == "__main__":
    main()
