"""Mixture of Experts: random-weight models at scale (scale) and figures."""
