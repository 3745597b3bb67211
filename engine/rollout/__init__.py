"""AlphaGo's fast rollout policy: local pattern features, a linear softmax over them, and rollouts to the end.

Layer: above ``engine.rules``, beside ``engine.net`` (numpy only: no torch, no network). ``patterns`` computes the
features of every point of many boards at once, ``policy`` holds the weights (an .npz file of plain arrays), and
``rollout`` plays positions out with the policy and scores them by area.
"""
