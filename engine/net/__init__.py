"""The network: input features and their symmetries, the evaluator protocol and its ONNX implementation (the GTP
engine's only need), and, for training and export only, the torch model, its GPU backend and Leela Zero's weight
format. Imports ``engine.rules``."""
