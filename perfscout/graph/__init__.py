"""perfscout.graph"""
