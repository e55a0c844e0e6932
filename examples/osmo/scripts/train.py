"""A stand-in training script for examples/osmo/torchrun-two-nodes.yaml."""

import argparse
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--save-to", default="/tmp")
arguments = parser.parse_args()
for epoch in range(arguments.epochs):
    sys.stdout.write(f"epoch {epoch}: {{'loss': {1.0 / (epoch + 1):.3f}}}\n")
