# Developer shortcuts; CI runs .ci/run.
PY ?= python

.PHONY: install test unit integration lint type bench notebooks demo

install:
	$(PY) -m pip install -e ".[test,server]"

test:
	$(PY) -m pytest -q

unit:
	$(PY) -m pytest -q tests/unit langchain_compact

integration:
	$(PY) -m pytest -q tests/integration

lint:
	ruff check langchain_compact tests bench
	ruff format --check langchain_compact tests bench

type:
	mypy langchain_compact

bench:
	$(PY) -m bench

notebooks:
	$(PY) -m pytest -q tests/test_notebooks.py

demo:
	langchain-compact demo
