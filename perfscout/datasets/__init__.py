"""perfscout.datasets"""
