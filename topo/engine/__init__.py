"""The engine: placement -> schedule -> loads -> contention -> cost -> results."""
