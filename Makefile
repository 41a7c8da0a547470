.PHONY: demo demo-mnist test setup proto lint bench

demo:  ## set up and run the main job on the local engine
	scripts/demo.sh

demo-mnist:  ## train, evaluate and predict mnist on real handwritten digits
	scripts/demo_mnist.sh

test:  ## set up and run every test (what CI runs)
	scripts/test.sh

setup:
	scripts/setup.sh

proto:  ## regenerate proto/*_pb2*.py from proto/elasticdl.proto
	.venv/bin/python scripts/gen_proto.py

lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check .

bench:
	.venv/bin/python bench/recordio.py
