"""Text engines: VISLA triplets (P1, P2, N), mined from relations (Sec. 3.3), from VSR's captions, or
written and validated by a chat LM (Sec. 3.2).
"""
