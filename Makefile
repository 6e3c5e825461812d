# Two entry points: `make demo` (the main job) and `make test`. Each sets up .venv itself.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first and pinned: on these machines the pinned CPU build installs from local disk.
	$(BIN)/pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/pip install --quiet -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/sentinel demo --out logs/demo

test: $(STAMP)
	$(BIN)/python -m pytest -q --durations=15

clean:
	rm -rf $(VENV) build dist *.egg-info logs
